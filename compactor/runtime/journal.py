"""Crash safety for rewrites: one journal format for every rewrite, and the cleanup of what dead runs left.

A rewrite writes new files first and commits afterwards; a process killed in between leaves files no
commit references. Readers never see them (they follow the log) but they waste space. Before an action
writes anything, ``<table>/_compactor/journal/<action>.json`` names what it will write:

- ``outputs``: the exact files (compactor chooses every output name before writing it);
- ``staging``: `_`-prefixed folders an engine writes intermediate files into (Spark);
- ``folders``: folders an engine writes files of its own naming into (a format's own library rewriting
  the table itself), with the time window ``[started_at, last heartbeat]`` in which it did;
- ``owned`` (optional): folders compactor created for this action alone (``compactor-<token>``, a name no
  other writer uses) that an engine writes files of its own naming into: every file in them that the
  table does not reference is this action's uncommitted output (files that a commit made live stay: the
  data of the table from then on);
- ``inputs`` (optional): the files the action replaces, where the format itself retires them after its
  commit (after a grace period, from a ledger of its own) rather than the commit doing so.

A heartbeat thread moves ``heartbeat_at`` forward while the action runs. The entry is deleted when the
action ends normally; when it fails, ``ended_at`` is set and the entry is kept for cleanup.

``recover`` (holding the table lease) deletes only what it can prove a dead run wrote and nobody
references, every deletion through the table's deletion gate (runtime/deletion.py: the format reads what
its log references now): named outputs; staging folders; and, in ``folders``, files written inside the
entry's window, by that engine (the format's ``engine_wrote`` judges the writer the footer names,
``created_by``) or torn, and older than a grace period, so that an appender writing into the same folder,
whose commit may still be pending, is given time to commit. An entry naming folders is kept when the
caller gives no ``engine_wrote``. When
some named output is referenced (the run died after its commit), the entry's ``inputs`` that nothing
references go to the caller's ``retire``; an entry with ``inputs`` is never dropped without one. Entries of runs that may still be
running are skipped; ``live_entries`` names them, for a caller that must refuse to run beside one.

Everything goes through ``runtime.storage.Storage`` with the table's storage options, so the same rules
hold on local disk, S3, Azure and GCS. Differences on object stores: an entry is replaced by one PUT (a
reader sees the old or the new entry, never a mix); object mtimes are whole seconds stamped by the
store's clock, so the folder rule's window gets a wider slack there.

A run has ended when its entry says so (``ended_at``: it failed and kept the entry) or when its process is
provably gone (runtime/liveness.py: same kernel boot and PID namespace, and no such process any more).
Anywhere else (another host, another container sharing this hostname, a paused process) nothing is
provable: its outputs are deleted only once its heartbeat is older than the lease TTL, after which its
lease has expired too and its fence refuses any commit (finding 3 of issue 18).
"""

from __future__ import annotations

import json
import logging
import os
import socket
import threading
from collections.abc import Callable, Collection, Iterable, Mapping
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from compactor.models.formats import metadata_names
from compactor.runtime import clock, liveness
from compactor.runtime.deletion import DeletionGate, delete_proved
from compactor.runtime.lease import default_ttl_s
from compactor.runtime.paths import is_remote, local_path
from compactor.runtime.storage import ObjectInfo, ObjectNotFoundError, Storage, StorageError, storage_for

log = logging.getLogger(__name__)

JOURNAL_DIR = "journal"
#: the name of every staging folder compactor writes (engines write a bin's files there first)
STAGING_PREFIX = "_compactor_staging_"
JOURNAL_PREFIX = f"_compactor/{JOURNAL_DIR}"
HEARTBEAT_S = 1.0
#: an entry of another host whose heartbeat is older than this belongs to a dead run
STALE_HEARTBEAT_S = 10 * HEARTBEAT_S
#: files younger than this are never deleted by the folder rule: an appender may not have committed yet
DEFAULT_ORPHAN_GRACE_S = 3600.0
#: filesystem mtime granularity and clock slack around the journal window
_SLACK_S = 2.0
#: object stores: mtimes are whole seconds from the store's clock, which may differ from ours
_SLACK_REMOTE_S = 30.0


@dataclass
class JournalEntry:
    """One action's journal entry (module docstring): what it writes, by which process, and when."""

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
    started_at: float = field(default_factory=clock.wall)
    heartbeat_at: float = field(default_factory=clock.wall)
    ended_at: float | None = None
    #: the writing process as runtime/liveness.py checks it
    identity: str = field(default_factory=liveness.identity)
    #: files (relative) the action replaces and retires itself after its commit (module docstring)
    inputs: list[str] = field(default_factory=list)
    #: folders (relative) compactor created for this action alone (module docstring)
    owned: list[str] = field(default_factory=list)

    def window_end(self) -> float:
        return self.ended_at if self.ended_at is not None else self.heartbeat_at + 2 * HEARTBEAT_S

    def running(self, now: float) -> bool:
        """False only when the run has provably ended (module docstring)."""
        if self.ended_at is not None or liveness.is_me(self.identity):
            return False  # it said so; or this very process, whose earlier run left it (not running now)
        if liveness.provably_dead(self.identity):
            return False
        return now - self.heartbeat_at < max(STALE_HEARTBEAT_S, default_ttl_s())


def journal_dir(table_uri: str) -> Path:
    """The journal folder of a local table (object stores: ``JOURNAL_PREFIX`` under the table root)."""
    return Path(local_path(table_uri)) / "_compactor" / JOURNAL_DIR


def _entry_path(action: str) -> str:
    return f"{JOURNAL_PREFIX}/{action.replace(':', '-').replace('/', '_')}.json"


def _write(storage: Storage, path: str, entry: JournalEntry) -> None:
    # no fsync on local disk: a killed process's writes survive in the page cache; only a power loss can
    # lose an entry, and then the files it named are merely left for the format's cleanup of unreferenced files
    # (fsync cost 7 ms per action)
    data = asdict(entry)
    for optional in ("inputs", "owned"):
        if not data[optional]:
            del data[optional]  # entries without them stay as the previous release wrote (and reads) them
    storage.write_bytes(path, json.dumps(data).encode())


def adopt(table_uri: str, entry: JournalEntry, storage_options: Mapping[str, Any] | None = None) -> None:
    """Put an entry built by the caller (from a record of a previous release) where ``recover`` finds it,
    under the name of its ``action``; writing it again replaces it."""
    _write(storage_for(table_uri, storage_options), _entry_path(entry.action), entry)


def folders_of(paths: Iterable[str]) -> list[str]:
    return sorted({os.path.dirname(p) for p in paths})


class ActionJournal:
    """Context manager around one rewrite action: the entry is on storage before the engine writes."""

    def __init__(self, table_uri: str, run_id: str, action: str, read_version: int | None, *,
                 outputs: Collection[str] = (), staging: Collection[str] = (), folders: Collection[str] = (),
                 inputs: Collection[str] = (), owned: Collection[str] = (),
                 storage_options: Mapping[str, Any] | None = None) -> None:
        self.storage = storage_for(table_uri, storage_options)
        self.entry = JournalEntry(run_id, action, table_uri, read_version, list(outputs), list(staging),
                                  list(folders), inputs=list(inputs), owned=list(owned))
        self.path = _entry_path(action)
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self._lock = threading.Lock()

    def __enter__(self) -> ActionJournal:
        _write(self.storage, self.path, self.entry)  # on storage before the engine writes a single file
        self._thread = threading.Thread(target=self._beat, daemon=True, name="journal-heartbeat")
        self._thread.start()
        return self

    def add_outputs(self, paths: Collection[str]) -> None:
        """Name more exact outputs (relative to the table root), on storage before this returns: for an
        engine that learns an output's name only as it starts writing it (its folder follows the rows'
        partition). Call before the file is created."""
        with self._lock:
            self.entry.outputs += [p for p in paths if p not in self.entry.outputs]
            _write(self.storage, self.path, self.entry)

    def _beat(self) -> None:
        while not self._stop.wait(HEARTBEAT_S):
            with self._lock:
                if self._stop.is_set():
                    return
                self.entry.heartbeat_at = clock.wall()
                try:
                    _write(self.storage, self.path, self.entry)
                except (OSError, StorageError) as e:
                    log.warning("journal heartbeat failed: %s", e)

    def __exit__(self, exc_type: object, *exc: object) -> None:
        with self._lock:
            self._stop.set()
        if self._thread is not None:
            self._thread.join(timeout=5)
        if exc_type is None:
            try:
                self.storage.delete(self.path)
            except StorageError as e:  # the action succeeded; the next run's recover removes the entry
                log.warning("could not delete the journal entry: %s", e)
        else:
            # the action failed: files it wrote may be uncommitted; keep the entry for recover()
            self.entry.ended_at = clock.wall()
            try:
                _write(self.storage, self.path, self.entry)
            except StorageError as e:  # the entry as last written stays; recover() judges it by heartbeat
                log.warning("could not mark the journal entry ended: %s", e)


def _written_by(storage: Storage, rel: str, engine_wrote: Callable[[str], bool]) -> bool:
    """Whether the engine of a folders entry wrote the file: ``engine_wrote`` judges the writer its footer
    names (``created_by``). A file without a readable footer is a torn write: no commit can ever validly
    reference it, and once older than the grace period nobody is still writing it."""
    import pyarrow.parquet as pq

    fs, root = storage.pyarrow_fs()
    try:
        created_by = pq.ParquetFile(f"{root}/{rel}", filesystem=fs).metadata.created_by or ""
    except Exception:  # noqa: BLE001 - pyarrow raises several types for truncated files
        if not storage.exists(rel):
            return False  # gone meanwhile: nothing to delete
        return True
    return engine_wrote(created_by)


def _entry_files(storage: Storage) -> tuple[list[ObjectInfo], list[str]]:
    """(every object in the journal folder, the entries' paths)"""
    listed = storage.list_dir(JOURNAL_PREFIX)[0]
    return listed, [o.path for o in listed if o.path.endswith(".json") and not os.path.basename(o.path).startswith(".")]


def _read_entry(storage: Storage, jfile: str) -> JournalEntry | None:
    """The entry at ``jfile``; None when it is gone meanwhile or unreadable (then it is left as it is)."""
    try:
        return JournalEntry(**json.loads(storage.read_bytes(jfile)))
    except ObjectNotFoundError:
        return None
    except (ValueError, TypeError) as e:
        log.warning("ignoring unreadable journal entry %s: %s", jfile, e)
        return None


def live_entries(table_uri: str, storage_options: Mapping[str, Any] | None = None, *,
                 now: float | None = None) -> list[JournalEntry]:
    """Entries of runs that may still be running (``JournalEntry.running``): ``recover`` leaves them."""
    storage = storage_for(table_uri, storage_options)
    now = clock.wall() if now is None else now
    entries = (_read_entry(storage, jfile) for jfile in _entry_files(storage)[1])
    return [e for e in entries if e is not None and e.running(now)]


def recover(table_uri: str, gate: Callable[[int | None], DeletionGate], *,
            grace_s: float = DEFAULT_ORPHAN_GRACE_S, now: float | None = None,
            storage_options: Mapping[str, Any] | None = None,
            retire: Callable[[list[str]], None] | None = None,
            engine_wrote: Callable[[str], bool] | None = None) -> list[str]:
    """Delete what dead runs left (module docstring). ``gate(since)``: the table's deletion gate
    (runtime/deletion.py), built once when some entry is to be recovered: it keeps every file the table
    references (the format reads its own log) and every file a commit after version ``since`` named (the
    earliest read version of the entries recovered; None: none known), and every deletion goes through it.
    ``retire(paths)``: an entry's unreferenced ``inputs`` once its commit landed. ``engine_wrote(created_by)``:
    whether a file in an entry's ``folders`` was written by the engine that wrote into them, by the writer its
    footer names (the format knows its engines). Returns deleted paths (relative to the table root). Call while
    holding the table lease."""
    storage = storage_for(table_uri, storage_options)
    now = clock.wall() if now is None else now
    listed, jfiles = _entry_files(storage)
    for o in listed:  # temp files of entry writes a kill interrupted (local disk)
        if os.path.basename(o.path).startswith(".") and o.path.endswith(".tmp") and now - o.mtime > 60:
            storage.delete(o.path)
    due = [(jfile, e) for jfile in jfiles
           if (e := _recoverable(storage, jfile, now, retire is not None, engine_wrote is not None))]
    if not due:
        return []
    versions = [e.read_version for _, e in due]
    table_gate = gate(None if None in versions else min(v for v in versions if v is not None))
    slack = _SLACK_REMOTE_S if is_remote(table_uri) else _SLACK_S
    deleted: list[str] = []
    for jfile, entry in due:
        outputs = [rel for rel in entry.outputs if storage.exists(rel)]
        outputs += [o.path for folder in entry.owned for o in storage.list(folder)]
        done = delete_proved(storage, table_gate, outputs, entry.staging)
        deleted += done.deleted
        referenced = [rel for rel in entry.outputs if rel in done.kept]
        if entry.inputs and retire is not None and referenced:  # killed after its commit
            still = table_gate.kept(entry.inputs)
            retire([rel for rel in entry.inputs if rel not in still])
        waiting = _recover_folders(storage, entry, table_gate, grace_s, now, slack, deleted, engine_wrote)
        if not waiting and not any(f in done.kept for f in entry.staging):
            storage.delete(jfile)
    if deleted:
        log.warning("%s: deleted %d uncommitted file(s) left by interrupted compactor runs", table_uri,
                    len(deleted))
    return deleted


def _recoverable(storage: Storage, jfile: str, now: float, can_retire: bool,
                 knows_engine: bool) -> JournalEntry | None:
    """The entry at ``jfile`` when its run provably ended and it names only what compactor writes; None (the
    entry stays) otherwise."""
    entry = _read_entry(storage, jfile)
    if entry is None or entry.running(now):
        return None
    if entry.inputs and not can_retire:
        log.warning("keeping journal entry %s: its replaced inputs need the format's recovery", jfile)
        return None
    if entry.folders and not knows_engine:
        log.warning("keeping journal entry %s: the files its engine named need the format's recovery", jfile)
        return None
    unsafe = [rel for rel in entry.outputs if not is_data_file(rel)] + \
             [rel for rel in entry.staging if not is_staging_folder(rel)] + \
             [rel for rel in entry.owned if not is_owned_folder(rel)]
    if unsafe:  # never from compactor's own writes: a damaged or edited entry deletes nothing
        log.warning("keeping journal entry %s: it names %d path(s) that are no output or staging folder of "
                    "compactor's (e.g. %r); nothing of it was deleted", jfile, len(unsafe), unsafe[0])
        return None
    return entry


def _safe_parts(parts: list[str]) -> bool:
    """No part empty, ``.``/``..``, or a folder no entry may name a path in: every registered format's
    metadata (its log), compactor's own state (compactor/models/formats.py ``metadata_names``)."""
    reserved = metadata_names()
    return all(p and p not in (".", "..") and p not in reserved and "\\" not in p for p in parts)


def is_data_file(rel: str) -> bool:
    """A file a rewrite of compactor's writes: a relative path into the table's data (never into a table's
    log or compactor's own state, never ``..``), whose name is not hidden (``_``/``.``: logs, staging)."""
    parts = rel.split("/")
    return bool(rel) and not rel.startswith("/") and _safe_parts(parts) and not parts[-1].startswith(("_", "."))


def is_staging_folder(rel: str) -> bool:
    """A staging folder compactor names (``<partition>/_compactor_staging_<token>``): deleting its prefix
    can never reach the table's data or log."""
    parts = rel.split("/")
    return (not rel.startswith("/") and _safe_parts(parts) and parts[-1].startswith(STAGING_PREFIX)
            and len(parts[-1]) > len(STAGING_PREFIX))


#: the name of every folder compactor creates for one action alone (``owned`` in an entry)
OWNED_PREFIX = "compactor-"


def is_owned_folder(rel: str) -> bool:
    """A folder compactor creates for one action (``<data folder>/compactor-<token>``, token of 16 or more
    characters): no other writer names a folder so, and no path in it is a table's log or compactor's state."""
    parts = rel.split("/")
    return (not rel.startswith("/") and _safe_parts(parts) and parts[-1].startswith(OWNED_PREFIX)
            and len(parts[-1]) >= len(OWNED_PREFIX) + 16)


def _recover_folders(storage: Storage, entry: JournalEntry, gate: DeletionGate, grace_s: float, now: float,
                     slack: float, deleted: list[str], engine_wrote: Callable[[str], bool] | None) -> bool:
    """The folder rule for engine-named outputs; True while some candidate is still inside the grace period."""
    waiting = False
    lo, hi = entry.started_at - slack, entry.window_end() + slack
    candidates: list[str] = []
    for folder in entry.folders:
        for obj in storage.list_dir(folder)[0]:
            rel = obj.path
            name = os.path.basename(rel)
            if name.startswith(("_", ".")) or not name.endswith(".parquet"):
                continue
            if not lo <= obj.mtime <= hi or engine_wrote is None or not _written_by(storage, rel, engine_wrote):
                continue
            if now - obj.mtime < grace_s:
                waiting = True
                continue
            candidates.append(rel)
    deleted += delete_proved(storage, gate, candidates).deleted
    return waiting


def pending_journals(table_uri: str, storage_options: Mapping[str, Any] | None = None) -> list[str]:
    """Names of journal entries left behind (killed or failed runs)."""
    objs = storage_for(table_uri, storage_options).list_dir(JOURNAL_PREFIX)[0]
    return sorted(os.path.basename(o.path)[:-5] for o in objs if o.path.endswith(".json")
                  and not os.path.basename(o.path).startswith("."))
