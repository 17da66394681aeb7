"""What happens around a Delta commit of compactor's: the check of the landed commit against the outcome
(from the log), the cleanup of a rewrite that did not commit, and the paths crash recovery must keep."""

from __future__ import annotations

import logging
from collections.abc import Sequence

from compactor.errors import VerificationError
from compactor.formats.base import ActionOutcome
from compactor.formats.delta.commit import find_commit
from compactor.formats.delta.log import Commit, commits_after, num_records
from compactor.models.table import TableLocation
from compactor.runtime.storage import StorageError, storage_for

log = logging.getLogger(__name__)


def check_commit(own: Commit, outcome: ActionOutcome) -> None:
    """After the commit, from the log: it removes exactly the inputs and adds exactly the outputs, and
    where the log has statistics, rows removed == rows added."""
    if set(own.removes) != set(outcome.removed_paths) or set(own.adds) != set(outcome.added_paths):
        raise VerificationError(f"commit {own.version} does not hold the planned swap "
                                f"({len(own.removes)} removes, {len(own.adds)} adds)")
    added_rows = [num_records(a) for a in own.adds.values()]
    if None not in added_rows and sum(added_rows) != outcome.rows_added:  # type: ignore[arg-type]
        raise VerificationError(f"commit {own.version}: the log says {sum(added_rows)} rows were added, the "  # type: ignore[arg-type]
                                f"footers {outcome.rows_added}")


def discard_uncommitted(table: TableLocation, outputs: Sequence[str], staging: Sequence[str], read_version: int,
                        marker: str) -> None:
    """Delete what a failed rewrite wrote - unless its commit landed after all (an interrupt inside the
    commit call): files the log references are never deleted. If the log cannot be read, the journal
    stays and the next run's recover decides."""
    try:
        landed = find_commit(table, read_version, marker, timeout_s=0) is not None
    except Exception:  # noqa: BLE001 - any failure to read the log means: decide later
        log.warning("%s: cannot read the log to clean up; the journal is kept for the next run", table.uri)
        return
    if landed:
        return
    storage = storage_for(table.uri, table.storage_options)
    try:
        for rel in outputs:
            storage.delete(rel)
        for rel in staging:
            storage.delete_prefix(rel)
    except StorageError as e:  # the journal stays; the next run's recover deletes what is left
        log.warning("%s: could not delete uncommitted outputs now: %s", table.uri, e)


def referenced_paths(table: TableLocation, since_version: int | None) -> set[str]:
    """Paths live now or named by any add/remove committed after ``since_version`` (crash recovery)."""
    from compactor.formats.delta.state import read_delta_state

    refs = set(read_delta_state(table).paths)
    for c in commits_after(table, since_version if since_version is not None else -1):
        refs.update(c.adds)
        refs.update(c.removes)
    return refs
