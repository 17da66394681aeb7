"""Guards against the duplicate-compaction hazard (README, "Safety model").

delta-rs 1.6 lets two dataChange=false commits remove the same files, so two compactions of the same
files both commit and every row of them is live twice. After compactor commits a rewrite it reads the
commits between its read version and its own: if one of them removed a file compactor also removed,
compactor's commit is the later one, the duplicate, and is reverted at once by the general repair
(formats/delta/repair.py): one dataChange=false commit removes compactor's outputs (and anything that
rewrote them since) and re-adds those of its inputs that no other commit removed (they are still on
storage until VACUUM), so every row is live exactly once again. The case where the other commit is the
later one is the watch's (tasks/watch.py) and the next run's (``apply`` repairs before it touches a
table).
"""

from __future__ import annotations

import logging
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

from compactor.errors import ApplyError
from compactor.formats.delta.commit import RemovedFile
from compactor.formats.delta.log import Commit, commits_after, read_commit

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


def undo_commit(table: Any, uri: str, storage_options: Mapping[str, str] | None, own: Commit,
                inputs: Sequence[RemovedFile], removed_by_others: Mapping[str, int],
                commit_metadata: Mapping[str, str]) -> Commit:
    """Repair the duplicate ``own`` made (it removed ``removed_by_others`` again): the general repair over
    the commits from the first overlapping one on. Returns the (last) repair commit. ``table`` and
    ``inputs`` are not needed any more: the log names everything the repair restores."""
    from compactor.formats.delta.repair import repair

    start = min(removed_by_others.values()) if removed_by_others else own.version
    result = repair(uri, storage_options, start=start, commit_metadata=commit_metadata)
    if not result.commits:
        raise ApplyError(f"commit {own.version} removed {len(removed_by_others)} file(s) already removed by "
                         f"version(s) {sorted(set(removed_by_others.values()))}, but the repair found no "
                         "duplicate to revert")
    log.warning("repaired duplicate compaction: commit %d overlapped %d remove(s) of version(s) %s", own.version,
                len(removed_by_others), sorted(set(removed_by_others.values())))
    repaired = read_commit(uri, result.commits[-1], storage_options)
    if repaired is None:
        raise ApplyError(f"repair commit {result.commits[-1]} is not in the log")
    return repaired
