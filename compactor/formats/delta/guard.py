"""Guards against the duplicate-compaction hazard (README, "Safety model").

delta-rs 1.6 lets two dataChange=false commits remove the same files, so two compactions of the same
files both commit and every row of them is live twice. After compactor commits a rewrite it reads the
commits between its read version and its own: if one of them removed a file compactor also removed,
compactor's commit is the duplicate and is undone at once by a repair commit (dataChange=false): it
removes compactor's outputs and re-adds those of its inputs that no concurrent commit removed (they are
still on storage until VACUUM), so every row is live exactly once again.
"""

from __future__ import annotations

import json
import logging
import time
from typing import Any, Iterable, Mapping, Sequence

from compactor.formats.delta.commit import MARKER, RemovedFile, find_commit
from compactor.formats.delta.log import Commit, commits_after

log = logging.getLogger(__name__)


def overlapping_removes(uri: str, storage_options: Mapping[str, str] | None, read_version: int, own_version: int,
                        own_removed: Iterable[str]) -> dict[str, int]:
    """Paths we removed that a commit in (read_version, own_version) also removed -> that commit's version."""
    mine = set(own_removed)
    found: dict[str, int] = {}
    for c in commits_after(uri, read_version, storage_options, until=own_version - 1):
        for p in mine.intersection(c.removes):
            found.setdefault(p, c.version)
    return found


def _stats(num_records: int | None) -> str | None:
    return json.dumps({"numRecords": num_records}) if num_records is not None else None


def undo_commit(table: Any, uri: str, storage_options: Mapping[str, str] | None, own: Commit,
                inputs: Sequence[RemovedFile], removed_by_others: Mapping[str, int],
                commit_metadata: Mapping[str, str]) -> Commit:
    """One dataChange=false commit removing ``own``'s adds and re-adding those of ``inputs`` (what ``own``
    removed) that no other commit removed. Returns the repair commit."""
    from deltalake.transaction import AddAction, CommitProperties, RemoveAction

    now = int(time.time() * 1000)
    actions: list[Any] = []
    for path in sorted(own.adds):
        add = own.adds[path]
        actions.append(RemoveAction(path, False, now, int(add.get("size") or 0), add.get("partitionValues") or {}))
    for f in inputs:
        if f.path in removed_by_others:
            continue
        actions.append(AddAction(f.path, f.size, dict(f.partition_values), now, False, _stats(f.num_records)))
    meta = {**commit_metadata, MARKER: commit_metadata[MARKER] + ":repair", "compactor.repair_of": str(own.version)}
    table.update_incremental()
    table.create_write_transaction(actions, mode="append", schema=table.schema(),
                                   partition_by=list(table.metadata().partition_columns),
                                   commit_properties=CommitProperties(custom_metadata=meta))
    repair = find_commit(uri, storage_options, own.version, meta[MARKER])
    log.warning("repaired duplicate compaction: commit %d overlapped %d remove(s) of version(s) %s", own.version,
                len(removed_by_others), sorted(set(removed_by_others.values())))
    if repair is None:
        raise RuntimeError(f"repair of commit {own.version} committed but could not be found in the log")
    return repair
