"""Apply one planned ``compact`` action to an Iceberg table with the local engine (pyiceberg, no JVM): read
the table at the planned snapshot, rewrite each bin into one verified file (rewrite.py), and commit every
bin of the action as one ``replace`` snapshot validated from the planned snapshot (replace.py).

Crash safety: a journal entry (runtime/journal.py) is on storage before any output is written, and names
each output before its file is created; the fence is checked right before the commit. A bin or commit that
is refused (stale, or what pyiceberg cannot do exactly) deletes this action's outputs through the deletion
gate and commits nothing; a commit whose outcome the catalog did not report keeps them (they may be live):
the next run's recovery judges them against the table's metadata then."""

from __future__ import annotations

import logging
import uuid
from typing import TYPE_CHECKING

from compactor.errors import ApplyError, StalePlanError, TableReadError
from compactor.formats.base import ActionContext, ActionOutcome
from compactor.formats.iceberg.maintenance_actions import IcebergMaintenanceAction
from compactor.formats.iceberg.read import iceberg_state, read_iceberg_state
from compactor.formats.iceberg.recovery import recover, relative
from compactor.formats.iceberg.replace import CommitOutcomeUnknown, replace
from compactor.formats.iceberg.retention_actions import IcebergRetentionAction
from compactor.formats.iceberg.rewrite import OutputNames, RewrittenBin, rewrite_bin
from compactor.models.results import ActionDetails
from compactor.planning.actions import Action, CompactAction
from compactor.runtime.faults import crash_point
from compactor.runtime.journal import ActionJournal

if TYPE_CHECKING:
    from pyiceberg.table import Table

    from compactor.models.state import TableState

log = logging.getLogger(__name__)


def run_action(action: Action, ctx: ActionContext) -> ActionOutcome:
    if isinstance(action, IcebergRetentionAction):  # expire_snapshots, remove_orphan_files
        from compactor.formats.iceberg.retention_run import run_retention

        return run_retention(action, ctx)
    if isinstance(action, IcebergMaintenanceAction):  # rewrite_position_deletes, rewrite_manifests
        from compactor.formats.iceberg.maintenance_run import run_maintenance

        planned, table = _read_planned(ctx, action.precondition.table_version)
        return run_maintenance(action, ctx, iceberg_state(planned), table)
    if not isinstance(action, CompactAction):
        raise ApplyError(f"{action.type} actions are not run on Iceberg tables")
    return run_compact(action, ctx)


def _read_planned(ctx: ActionContext, planned_id: int | None) -> tuple[TableState, Table]:
    """The table at the planned snapshot; StalePlanError when it cannot be read there (expired)."""
    try:
        return read_iceberg_state(ctx.location, planned_id)
    except TableReadError as e:
        raise StalePlanError(f"cannot read the table at the planned snapshot {planned_id}: {e.message}; nothing "
                             "was committed", hint="plan again") from None


def run_compact(action: CompactAction, ctx: ActionContext) -> ActionOutcome:
    location = ctx.location
    planned_id = action.precondition.table_version
    planned, table = _read_planned(ctx, planned_id)
    st = iceberg_state(planned)
    if ctx.dry_run:
        return ActionOutcome(details=ActionDetails(dry_run=True))
    if ctx.table.engine == "spark":
        from compactor.formats.iceberg.spark_run import run_compact_spark

        outcome = run_compact_spark((action,), ctx, planned, table)[0]
        if isinstance(outcome, StalePlanError):
            raise outcome
        return outcome
    root, options = location.uri, location.storage_options
    names = OutputNames()
    inputs = action.input_paths
    key = ctx.commit_metadata.get("compactor.action") or f"iceberg-{uuid.uuid4().hex}"
    entry = ActionJournal(root, ctx.commit_metadata.get("compactor.run_id", ""), key, planned_id,
                          storage_options=options)
    bins: list[RewrittenBin] = []
    committed = False
    try:
        with entry:
            crash_point("iceberg.journal_written")
            for b in action.bins:
                others = [p for p in inputs if p not in set(b)]
                bins.append(rewrite_bin(table, st, b, names, removed_with=others,
                                        on_output=lambda path: entry.add_outputs([relative(root, path, options)])))
                if ctx.on_bin_done is not None:
                    ctx.on_bin_done(sum(st.file(p).size for p in b))
            crash_point("iceberg.outputs_written")
            if ctx.fence is not None:
                ctx.fence()
            result = replace(table, st, bins, ctx.commit_metadata)
            committed = True
            crash_point("iceberg.after_commit")
    except CommitOutcomeUnknown:
        raise  # the outputs stay: the commit may have landed (the next run's recovery judges them)
    except BaseException:
        if not committed:
            try:  # this run's entry says it ended: its outputs no snapshot references go
                recover(location, 0.0)
            except Exception as e:  # noqa: BLE001 - the next run's recovery tries again; the refusal stands
                log.warning("%s: could not delete the outputs of a refused rewrite yet: %s", location.identifier, e)
        raise
    sizes = {f.path: f.size for f in st.files}
    added = [b.output for b in bins if b.output is not None]
    return ActionOutcome(
        files_removed=len(result.removed), files_added=len(result.added),
        bytes_removed=sum(sizes[p] for p in result.removed), bytes_added=sum(int(f.file_size_in_bytes) for f in added),
        rows_removed=sum(b.rows_in - b.rows_deleted for b in bins), rows_added=sum(b.rows_out for b in bins),
        version_before=planned_id, version_after=result.snapshot_id, removed_paths=result.removed,
        added_paths=result.added, details=ActionDetails(method="rewrite", bins=len(bins)))


def run_group(actions: tuple[Action, ...], ctx: ActionContext) -> list[ActionOutcome | StalePlanError]:
    """Compact actions of one commit group (the spark engine's: ``group_key``), planned at one snapshot."""
    from compactor.formats.iceberg.spark_run import run_compact_spark

    compacts = [a for a in actions if isinstance(a, CompactAction)]
    versions = {a.precondition.table_version for a in compacts}
    if len(compacts) != len(actions) or len(versions) != 1:
        raise ApplyError("an Iceberg commit group holds compact actions planned at one snapshot only")
    planned, table = _read_planned(ctx, versions.pop())
    if ctx.dry_run:
        return [ActionOutcome(details=ActionDetails(dry_run=True)) for _ in actions]
    return list(run_compact_spark(compacts, ctx, planned, table))


#: the group key of compact actions the spark engine may commit together
SPARK_GROUP = "iceberg-spark"
