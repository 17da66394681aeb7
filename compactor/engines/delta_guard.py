"""Guards against delta-rs 1.6's duplicate-compaction hazard (README, "Safety model").

delta-rs lets two dataChange=false commits remove the same files, so two compactions of the same files
both commit and every row appears twice. compactor (1) holds a table lease, (2) re-checks right before
committing that every file it removes is still live, and (3) after committing scans the commits between
its read version and its own for removes that overlap its own; if any, it repairs at once with a
dataChange=false commit that removes its own adds and re-adds those of its removed files that no
concurrent commit removed. Only the later of two overlapping commits sees the other in its window, so
exactly one side repairs.
"""

from __future__ import annotations

import json
import logging
import time
from dataclasses import dataclass, field
from typing import Any, Iterable, Mapping

import pyarrow as pa
import pyarrow.fs as pafs

from compactor.errors import ApplyError, StalePlanError

log = logging.getLogger(__name__)


@dataclass
class Commit:
    version: int
    adds: dict[str, dict[str, Any]] = field(default_factory=dict)
    removes: dict[str, dict[str, Any]] = field(default_factory=dict)
    info: dict[str, Any] = field(default_factory=dict)


def _fs(uri: str, storage_options: Mapping[str, str] | None) -> tuple[pafs.FileSystem, str]:
    return pafs.FileSystem.from_uri(uri) if "://" in uri else (pafs.LocalFileSystem(), uri)


def read_commit(uri: str, version: int, storage_options: Mapping[str, str] | None = None) -> Commit | None:
    fs, base = _fs(uri, storage_options)
    path = f"{base.rstrip('/')}/_delta_log/{version:020d}.json"
    try:
        with fs.open_input_stream(path) as f:
            text = f.read().decode("utf-8")
    except (FileNotFoundError, OSError):
        return None
    c = Commit(version)
    from urllib.parse import unquote

    for line in text.splitlines():
        if not line.strip():
            continue
        obj = json.loads(line)
        if "add" in obj:
            c.adds[unquote(obj["add"]["path"])] = obj["add"]
        elif "remove" in obj:
            c.removes[unquote(obj["remove"]["path"])] = obj["remove"]
        elif "commitInfo" in obj:
            c.info = obj["commitInfo"]
    return c


def latest_version(uri: str, storage_options: Mapping[str, str] | None = None) -> int:
    from deltalake import DeltaTable

    return DeltaTable(uri, storage_options=dict(storage_options or {}) or None).version()


def live_paths(uri: str, storage_options: Mapping[str, str] | None = None) -> set[str]:
    from deltalake import DeltaTable

    dt = DeltaTable(uri, storage_options=dict(storage_options or {}) or None)
    return set(pa.table(dt.get_add_actions(flatten=True)).column("path").to_pylist())


def assert_files_live(uri: str, storage_options: Mapping[str, str] | None, paths: Iterable[str]) -> None:
    """Raise StalePlanError if any of ``paths`` is no longer a live file of the table."""
    live = live_paths(uri, storage_options)
    gone = [p for p in paths if p not in live]
    if gone:
        raise StalePlanError(f"{len(gone)} planned input file(s) are no longer live (e.g. {gone[0]})",
                             hint="the table changed since planning; re-plan")


def find_own_commit(uri: str, storage_options: Mapping[str, str] | None, after_version: int, marker: str,
                    timeout_s: float = 5.0, *, latest: int | None = None) -> Commit:
    """The commit after ``after_version`` whose commitInfo carries compactor.action == marker.
    ``latest``: a version known to exist (e.g. the handle's version after committing), saves a table load."""
    deadline = time.time() + timeout_s
    while True:
        latest = latest if latest is not None else latest_version(uri, storage_options)
        for v in range(after_version + 1, latest + 1):
            c = read_commit(uri, v, storage_options)
            if c is not None and _marker_of(c.info) == marker:
                return c
        if time.time() > deadline:
            raise ApplyError(f"could not find compactor's commit (marker {marker}) after version {after_version}")
        latest = None
        time.sleep(0.05)


def _marker_of(info: Mapping[str, Any]) -> str | None:
    if "compactor.action" in info:
        return info["compactor.action"]
    meta = info.get("userMetadata") or info.get("custom_metadata")
    if isinstance(meta, str):
        try:
            meta = json.loads(meta)
        except ValueError:
            return None
    if isinstance(meta, Mapping):
        return meta.get("compactor.action")
    return None


def find_overlapping_removes(uri: str, storage_options: Mapping[str, str] | None, read_version: int,
                             own_version: int, own_removed: Iterable[str]) -> dict[str, int]:
    """Paths we removed that a commit in (read_version, own_version) also removed -> that commit's version."""
    mine = set(own_removed)
    found: dict[str, int] = {}
    for v in range(read_version + 1, own_version):
        c = read_commit(uri, v, storage_options)
        if c is None:
            continue
        for p in mine.intersection(c.removes):
            found.setdefault(p, v)
    return found


def _stats_for(path: str, num_records: Mapping[str, int | None] | None) -> str:
    n = (num_records or {}).get(path)
    return json.dumps({"numRecords": n}) if n is not None else "{}"


def repair_duplicate_commit(uri: str, storage_options: Mapping[str, str] | None,
                            own_added_paths: Iterable[str] | Commit, own_removed_paths: Iterable[str] | Mapping[str, int],
                            removed_by_others: Mapping[str, int] | Mapping[str, str] | None = None,
                            own_version: int | Mapping[str, int | None] | None = None, *,
                            commit_metadata: Mapping[str, str] | None = None,
                            num_records: Mapping[str, int | None] | None = None) -> int:
    """Undo a duplicating compaction at once: one dataChange=false commit that removes our own adds and
    re-adds those of our removed files that no concurrent commit removed (they stay on storage until
    VACUUM), so every row is live exactly once again.

    ``own_version`` is the version our compaction committed; sizes, partition values and statistics of
    the files are taken from that commit (``num_records``: path -> rows, used when a remove carries no
    stats). Returns the repair commit's version. Callers: the local engine and the spark engine.

    The first form, ``repair_duplicate_commit(uri, storage_options, own_commit, removed_by_others,
    commit_metadata, num_records)`` with the ``Commit`` from ``find_own_commit``, is kept working."""
    from deltalake import DeltaTable
    from deltalake.transaction import AddAction, CommitProperties, RemoveAction

    if isinstance(own_added_paths, Commit):
        first = own_added_paths
        commit_metadata = dict(removed_by_others or {}) if commit_metadata is None else commit_metadata
        num_records = own_version if num_records is None and isinstance(own_version, Mapping) else num_records
        own_added_paths, own_removed_paths, removed_by_others = first.adds, first.removes, own_removed_paths
        own_version = first.version
    if not isinstance(own_version, int) or removed_by_others is None:
        raise TypeError("repair_duplicate_commit needs removed_by_others and own_version")
    own = read_commit(uri, own_version, storage_options)
    if own is None:
        raise ApplyError(f"cannot repair: commit {own_version} of {uri} is unreadable")
    adds, removes = set(own_added_paths), set(own_removed_paths)
    if not adds <= set(own.adds) or not removes <= set(own.removes):
        raise ApplyError(f"cannot repair: commit {own_version} does not hold the given adds/removes")
    opts = dict(storage_options or {}) or None
    dt = DeltaTable(uri, storage_options=opts)
    now_ms = int(time.time() * 1000)
    actions: list[Any] = []
    for path in sorted(adds):
        add = own.adds[path]
        actions.append(RemoveAction(path=path, data_change=False, deletion_timestamp=now_ms, size=add.get("size"),
                                    partition_values=add.get("partitionValues") or {}))
    for path in sorted(removes - set(removed_by_others)):
        rem = own.removes[path]
        actions.append(AddAction(path=path, size=int(rem.get("size") or 0),
                                 partition_values=rem.get("partitionValues") or {}, modification_time=now_ms,
                                 data_change=False, stats=rem.get("stats") or _stats_for(path, num_records)))
    meta = {**(commit_metadata or {}), "compactor.repair_of": str(own_version)}
    dt.create_write_transaction(actions, mode="append", schema=dt.schema(),
                                partition_by=dt.metadata().partition_columns,
                                commit_properties=CommitProperties(custom_metadata=meta))
    log.warning("repaired duplicate compaction: commit %d overlapped %d earlier remove(s)", own_version,
                len(removed_by_others))
    return DeltaTable(uri, storage_options=opts).version()
