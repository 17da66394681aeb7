"""Guards against the duplicate-compaction hazard (README, "Safety model").

delta-rs 1.6 lets two dataChange=false commits remove the same files, so two compactions of the same
files both commit and every row of them is live twice. After compactor commits a rewrite it reads the
commits between its read version and its own: if one of them removed a file compactor also removed,
compactor's commit is the later one, the duplicate, and is reverted at once by the general repair
(formats/delta/duplicates/repair.py): one dataChange=false commit removes compactor's outputs (and anything that
rewrote them since) and re-adds those of its inputs that no other commit removed (they are still on
storage until VACUUM, and copied under a new name when VACUUM may already delete them), so every row
is live exactly once again, after the same content proof as every repair. The case where the other
commit is the later one is found by the next ``plan``, which plans its repair as an action to review.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Iterable, Mapping

from compactor.errors import ApplyError
from compactor.formats.delta.read.log import Commit, commits_after, read_commit
from compactor.models.table import TableLocation

log = logging.getLogger(__name__)


def overlapping_removes(table: TableLocation, read_version: int, own_version: int,
                        own_removed: Iterable[str]) -> dict[str, int]:
    """Paths we removed that a commit in (read_version, own_version) also removed -> that commit's version."""
    mine = set(own_removed)
    found: dict[str, int] = {}
    for c in commits_after(table, read_version, until=own_version - 1):
        for p in mine.intersection(c.removes):
            found.setdefault(p, c.version)
    return found


def undo_commit(table: TableLocation, own: Commit, removed_by_others: Mapping[str, int],
                commit_metadata: Mapping[str, str], fence: Callable[[], None] | None = None) -> Commit:
    """Revert ``own``, which removed ``removed_by_others`` again (its rows are live twice): the one repair
    apply makes without a plan listing it, and only when the repair derived from the log answers exactly
    this commit (the same content proof as every repair). Returns the repair commit."""
    from compactor.formats.delta.duplicates.detection import detect
    from compactor.formats.delta.duplicates.repair import execute

    start = min(removed_by_others.values()) if removed_by_others else own.version
    found = detect(table, start=start)
    proposal = found.proposal
    if proposal is None or proposal.anomalies != (own.version,):
        raise ApplyError(f"commit {own.version} removed {len(removed_by_others)} file(s) already removed by "
                         f"version(s) {sorted(set(removed_by_others.values()))}: rows are live twice and the "
                         "revert of this commit alone cannot answer it",
                         hint="run `compactor plan`: it plans the repair (`compactor repair` applies it)")
    result = execute(table, found, commit_metadata=commit_metadata, fence=fence)
    log.warning("reverted own commit %d: it overlapped %d remove(s) of version(s) %s", own.version,
                len(removed_by_others), sorted(set(removed_by_others.values())))
    repaired = read_commit(table, result.commits[-1])
    if repaired is None:
        raise ApplyError(f"repair commit {result.commits[-1]} is not in the log")
    return repaired
