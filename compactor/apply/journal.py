"""Crash safety for rewrites: a journal of in-flight actions and the cleanup of files they left behind.

delta-rs writes a compaction's output files straight into the partition folders and commits afterwards.
A process killed between the two leaves files that no commit references. They never affect readers
(readers follow the log), but they waste space until a VACUUM. Before every rewrite the runner writes a
journal entry ``<table>/_compactor/journal/<run>-<n>.json`` naming the folders the action
writes to and when it started; a heartbeat thread moves ``heartbeat_at`` forward while it runs. The
entry is deleted when the action ends normally (committed or cleanly failed: then ``ended_at`` is set
first and the entry is kept for cleanup).

``recover_orphans`` deletes only files compactor can prove it wrote: in a folder named by an entry whose
process is gone, not referenced by any commit since the entry's read version nor live, modified inside
the entry's [started_at, last heartbeat] window, written by delta-rs (parquet footer ``created_by``
``delta-rs ...``; Spark writers say ``parquet-mr``) or torn (no footer), and older than a grace period, so that an appender
writing into the same folder at that moment, whose commit may still be pending, is given time to commit.
Everything else is left for VACUUM. Local tables only (object-store tables skip the journal).
"""

from __future__ import annotations

import json
import logging
import os
import socket
import threading
import time
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Iterable

from compactor.engines.lease import LEASE_DIR, _pid_alive
from compactor.state.delta import is_uri

log = logging.getLogger(__name__)

JOURNAL_DIR = "journal"
HEARTBEAT_S = 1.0
#: files younger than this are never deleted: a concurrent appender may not have committed them yet
DEFAULT_ORPHAN_GRACE_S = 3600.0
#: filesystem mtime granularity and clock slack around the journal window
_SLACK_S = 2.0


@dataclass
class JournalEntry:
    run_id: str
    action: str
    table_uri: str
    read_version: int | None
    #: folders (relative to the table root, "" = the root) the action writes new files into
    folders: list[str]
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
            return _pid_alive(self.pid) and self.pid != os.getpid()
        return now - self.heartbeat_at < 10 * HEARTBEAT_S


def journal_dir(table_uri: str) -> Path:
    return Path(table_uri) / LEASE_DIR / JOURNAL_DIR


def _write(path: Path, entry: JournalEntry) -> None:
    # no fsync: a killed process's writes survive in the page cache; only a power loss can lose an
    # entry, and then the files it named are merely left for VACUUM (fsync cost 7 ms per action)
    tmp = path.with_name(f".{path.name}.tmp")
    tmp.write_text(json.dumps(asdict(entry)), encoding="utf-8")
    os.replace(tmp, path)


def folders_of(paths: Iterable[str]) -> list[str]:
    return sorted({os.path.dirname(p) for p in paths})


class ActionJournal:
    """Context manager around one rewrite action (a no-op for object-store tables)."""

    def __init__(self, table_uri: str, run_id: str, action: str, read_version: int | None,
                 folders: list[str]) -> None:
        self.enabled = not is_uri(table_uri)
        self.entry = JournalEntry(run_id, action, table_uri, read_version, folders)
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
            # the action failed: files it wrote may be uncommitted; keep the entry for recover_orphans
            self.entry.ended_at = time.time()
            _write(self.path, self.entry)


def _referenced(table_uri: str, since_version: int | None) -> set[str]:
    """Paths live now or named by any add/remove committed after ``since_version``."""
    import pyarrow as pa
    from deltalake import DeltaTable

    from compactor.engines.delta_guard import read_commit

    dt = DeltaTable(table_uri)
    refs = set(pa.table(dt.get_add_actions(flatten=True)).column("path").to_pylist())
    for v in range((since_version if since_version is not None else -1) + 1, dt.version() + 1):
        c = read_commit(table_uri, v)
        if c is not None:
            refs.update(c.adds)
            refs.update(c.removes)
    return refs


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


def recover_orphans(table_uri: str, *, grace_s: float = DEFAULT_ORPHAN_GRACE_S,
                    now: float | None = None) -> list[str]:
    """Delete files left by dead compactor runs (see the module docstring). Returns deleted paths
    (relative to the table root). Call while holding the table lease."""
    if is_uri(table_uri):
        return []
    jdir = journal_dir(table_uri)
    if not jdir.is_dir():
        return []
    now = time.time() if now is None else now
    root = Path(table_uri)
    deleted: list[str] = []
    for jfile in sorted(jdir.glob("*.json")):
        try:
            entry = JournalEntry(**json.loads(jfile.read_text(encoding="utf-8")))
        except (ValueError, TypeError, OSError) as e:
            log.warning("ignoring unreadable journal entry %s: %s", jfile, e)
            continue
        if entry.running(now):
            continue
        refs = _referenced(table_uri, entry.read_version)
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
        if not waiting:
            jfile.unlink(missing_ok=True)
    if deleted:
        log.warning("%s: deleted %d uncommitted file(s) left by interrupted compactor runs", table_uri,
                    len(deleted))
    return deleted
