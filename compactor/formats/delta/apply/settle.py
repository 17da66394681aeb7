"""What happens around a Delta commit of compactor's: the check of the landed commit against the outcome
(from the log) and the cleanup of a rewrite that did not commit."""

from __future__ import annotations

import logging
from collections.abc import Sequence

from compactor.errors import VerificationError
from compactor.formats.base import ActionOutcome
from compactor.formats.delta.apply.commit import find_commit
from compactor.formats.delta.read.log import Commit, num_records
from compactor.formats.delta.read.references import references
from compactor.models.table import TableLocation
from compactor.runtime.deletion import delete_proved
from compactor.runtime.storage import storage_for

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
    commit call): each file goes through the deletion gate, which keeps any the log references. If the log
    cannot be read, the journal stays and the next run's recover decides."""
    try:
        landed = find_commit(table, read_version, marker, timeout_s=0) is not None
        if landed:
            return
        delete_proved(storage_for(table.uri, table.storage_options), references(table), outputs, staging)
    except Exception as e:  # noqa: BLE001 - any failure to read the log or to delete means: decide later
        log.warning("%s: could not clean up the uncommitted outputs now (%s); the journal is kept for the next "
                    "run's recovery", table.uri, e)
