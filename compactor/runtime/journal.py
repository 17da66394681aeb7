"""Crash safety for rewrites: one journal format for every rewrite, and the cleanup of what dead runs left.

A rewrite writes new files first and commits afterwards; a process killed in between leaves files no
commit references. Readers never see them (they follow the log) but they waste space. Before an action
writes anything, ``<table>/_compactor/journal/<action>.json`` names what it will write:

- ``outputs``: the exact files (compactor chooses every output name before writing it);
- ``staging``: `_`-prefixed folders an engine writes intermediate files into (Spark);
- ``folders``: folders an engine writes files of its own naming into (delta-rs z-order), with the
  time window ``[started_at, last heartbeat]`` in which it did.

A heartbeat thread moves ``heartbeat_at`` forward while the action runs. The entry is deleted when the
action ends normally; when it fails, ``ended_at`` is set and the entry is kept for cleanup.

``recover`` (holding the table lease) deletes only what it can prove a dead run wrote and nobody
references: named outputs that no commit since the entry's read version references and that are not
live; staging folders; and, in ``folders``, files written inside the entry's window, by delta-rs (footer
``created_by``) or torn, and older than a grace period, so that an appender writing into the same
folder, whose commit may still be pending, is given time to commit. Local tables only for now.
"""

from __future__ import annotations

import json
import logging
import os
import shutil
import socket
import threading
import time
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Callable, Collection, Iterable

from compactor.runtime.lease import pid_alive
from compactor.runtime.paths import is_remote, local_path

log = logging.getLogger(__name__)

JOURNAL_DIR = "journal"
HEARTBEAT_S = 1.0
#: files younger than this are never deleted by the folder rule: an appender may not have committed yet
DEFAULT_ORPHAN_GRACE_S = 3600.0
#: filesystem mtime granularity and clock slack around the journal window
_SLACK_S = 2.0


@dataclass
class JournalEntry:
    run_id: str
    action: str
    table_uri: str
    read_version: int | None
    #: exact files (relative to the table root) the action writes
    outputs: list[str] = field(default_factory=list)
    #: intermediate folders (relative to the table root), deleted whole
    staging: list[str] = field(default_factory=list)
    #: folders (relative, "" = the root) an engine writes files of its own naming into
    folders: list[str] = field(default_factory=list)
    host: str = field(default_factory=socket.gethostname)
    pid: int = field(default_factory=os.getpid)
    started_at: float = field(default_factory=time.time)
    heartbeat_at: float = field(default_factory=time.time)
    ended_at: float | None = None

    def window_end(self) -> float:
        return self.ended_at if self.ended_at is not None else self.heartbeat_at + 2 * HEARTBEAT_S

    def running(self, now: float) -> bool:
        if self.ended_at is not None:
            return False
        if self.host == socket.gethostname():
            return pid_alive(self.pid) and self.pid != os.getpid()
        return now - self.heartbeat_at < 10 * HEARTBEAT_S


def journal_dir(table_uri: str) -> Path:
    return Path(local_path(table_uri)) / "_compactor" / JOURNAL_DIR


def _write(path: Path, entry: JournalEntry) -> None:
    # no fsync: a killed process's writes survive in the page cache; only a power loss can lose an
    # entry, and then the files it named are merely left for VACUUM (fsync cost 7 ms per action)
    tmp = path.with_name(f".{path.name}.tmp")
    tmp.write_text(json.dumps(asdict(entry)), encoding="utf-8")
    os.replace(tmp, path)


def folders_of(paths: Iterable[str]) -> list[str]:
    return sorted({os.path.dirname(p) for p in paths})


class ActionJournal:
    """Context manager around one rewrite action (a no-op on object stores for now)."""

    def __init__(self, table_uri: str, run_id: str, action: str, read_version: int | None, *,
                 outputs: Collection[str] = (), staging: Collection[str] = (), folders: Collection[str] = ()) -> None:
        self.enabled = not is_remote(table_uri)
        self.entry = JournalEntry(run_id, action, table_uri, read_version, list(outputs), list(staging),
                                  list(folders))
        self.path = journal_dir(table_uri) / f"{action.replace(':', '-').replace('/', '_')}.json"
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None

    def __enter__(self) -> "ActionJournal":
        if self.enabled:
            self.path.parent.mkdir(parents=True, exist_ok=True)
            _write(self.path, self.entry)  # on disk before the engine writes a single file
            self._thread = threading.Thread(target=self._beat, daemon=True, name="journal-heartbeat")
            self._thread.start()
        return self

    def _beat(self) -> None:
        while not self._stop.wait(HEARTBEAT_S):
            self.entry.heartbeat_at = time.time()
            try:
                _write(self.path, self.entry)
            except OSError as e:
                log.warning("journal heartbeat failed: %s", e)

    def __exit__(self, exc_type: object, *exc: object) -> None:
        if not self.enabled:
            return
        self._stop.set()
        if self._thread is not None:
            self._thread.join(timeout=5)
        if exc_type is None:
            self.path.unlink(missing_ok=True)
        else:
            # the action failed: files it wrote may be uncommitted; keep the entry for recover()
            self.entry.ended_at = time.time()
            _write(self.path, self.entry)


def _written_by_delta_rs(path: Path) -> bool:
    """delta-rs stamps ``created_by = "delta-rs version py-1.6.6"`` (older builds: ``parquet-rs``);
    Spark writes ``parquet-mr``. A file without a readable footer is a torn write: no commit can ever
    validly reference it, and once older than the grace period nobody is still writing it."""
    import pyarrow.parquet as pq

    try:
        created_by = pq.ParquetFile(path).metadata.created_by or ""
    except Exception:  # noqa: BLE001 - pyarrow raises several types for truncated files
        return True
    return created_by.startswith(("delta-rs", "parquet-rs"))


def recover(table_uri: str, referenced: Callable[[int | None], Collection[str]], *,
            grace_s: float = DEFAULT_ORPHAN_GRACE_S, now: float | None = None) -> list[str]:
    """Delete what dead runs left (module docstring). ``referenced(read_version)``: every path live now
    or named by a commit after ``read_version`` (the format knows how to read its log). Returns deleted
    paths (relative to the table root). Call while holding the table lease."""
    if is_remote(table_uri):
        return []
    jdir = journal_dir(table_uri)
    if not jdir.is_dir():
        return []
    now = time.time() if now is None else now
    root = Path(local_path(table_uri))
    deleted: list[str] = []
    for jfile in sorted(jdir.glob("*.json")):
        try:
            entry = JournalEntry(**json.loads(jfile.read_text(encoding="utf-8")))
        except (ValueError, TypeError, OSError) as e:
            log.warning("ignoring unreadable journal entry %s: %s", jfile, e)
            continue
        if entry.running(now):
            continue
        refs = referenced(entry.read_version)
        for rel in entry.outputs:
            f = root / rel
            if rel not in refs and f.is_file():
                f.unlink(missing_ok=True)
                deleted.append(rel)
        for rel in entry.staging:
            shutil.rmtree(root / rel, ignore_errors=True)
        waiting = _recover_folders(root, entry, refs, grace_s, now, deleted)
        if not waiting:
            jfile.unlink(missing_ok=True)
    if deleted:
        log.warning("%s: deleted %d uncommitted file(s) left by interrupted compactor runs", table_uri,
                    len(deleted))
    return deleted


def _recover_folders(root: Path, entry: JournalEntry, refs: Collection[str], grace_s: float, now: float,
                     deleted: list[str]) -> bool:
    """The folder rule for engine-named outputs; True while some candidate is still inside the grace period."""
    waiting = False
    lo, hi = entry.started_at - _SLACK_S, entry.window_end() + _SLACK_S
    for folder in entry.folders:
        fdir = root / folder
        if not fdir.is_dir():
            continue
        for f in fdir.iterdir():
            rel = f"{folder}/{f.name}" if folder else f.name
            if not f.is_file() or f.name.startswith(("_", ".")) or not f.name.endswith(".parquet"):
                continue
            if rel in refs:
                continue
            mtime = f.stat().st_mtime
            if not lo <= mtime <= hi or not _written_by_delta_rs(f):
                continue
            if now - mtime < grace_s:
                waiting = True
                continue
            f.unlink(missing_ok=True)
            deleted.append(rel)
    return waiting


def pending_journals(table_uri: str) -> list[str]:
    """Names of journal entries left behind (killed or failed runs)."""
    jdir = journal_dir(table_uri)
    return sorted(p.stem for p in jdir.glob("*.json")) if jdir.is_dir() else []
