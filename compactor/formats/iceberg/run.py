"""Apply planned Iceberg actions: retention (retention_run.py), its own maintenance (maintenance_run.py: the
spark engine's Iceberg actions) and ``compact`` actions, a commit group at a
time (``group_key``: consecutive compact actions planned at one snapshot, within the profile's
``commit_every_bins``/``commit_every_bytes``), each group read once at the planned snapshot and committed
as one ``replace`` snapshot by the target's engine: local_run.py (pyiceberg, no JVM) or spark_run.py."""

from __future__ import annotations

from typing import TYPE_CHECKING

from compactor.errors import ApplyError, CompactorError, StalePlanError, TableReadError, UnsupportedTableError
from compactor.formats.base import ActionContext, ActionOutcome
from compactor.formats.iceberg.actions import NATIVE_NEEDS_SPARK
from compactor.formats.iceberg.catalog import open_location
from compactor.formats.iceberg.local_run import run_compact_local
from compactor.formats.iceberg.maintenance_actions import IcebergMaintenanceAction
from compactor.formats.iceberg.read import iceberg_state, read_iceberg_state
from compactor.formats.iceberg.retention_actions import IcebergRetentionAction
from compactor.formats.iceberg.state import IcebergState
from compactor.models.results import ActionDetails
from compactor.planning.actions import Action, CompactAction

if TYPE_CHECKING:
    from pyiceberg.table import Table

    from compactor.models.state import TableState


def _writable(ctx: ActionContext) -> None:
    """Refuse a table a policy names by path: it was planned from its metadata files, and only its catalog
    commits to it."""
    if ctx.location.identifier is None:
        raise UnsupportedTableError(f"{ctx.location.uri}: an Iceberg table named by path is planned read-only (from its "
                                    "newest metadata file); nothing was changed",
                                    hint="name it with `catalog: {name, namespace, table}` to apply its plan")


def run_action(action: Action, ctx: ActionContext) -> ActionOutcome:
    _writable(ctx)
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
    """The table at the planned snapshot; StalePlanError when it cannot be read there (expired). The state
    apply read before the run is that already when the planned snapshot was then the current one (every
    group of the run: Iceberg's ``simulate`` keeps it): only the table is loaded again."""
    if ctx.state.version == planned_id and isinstance(ctx.state.extra, IcebergState):
        return ctx.state, open_location(ctx.location)[0]
    try:
        return read_iceberg_state(ctx.location, planned_id)
    except TableReadError as e:
        raise StalePlanError(f"cannot read the table at the planned snapshot {planned_id}: {e.message}; nothing "
                             "was committed", hint="plan again") from None


def run_compact(action: CompactAction, ctx: ActionContext) -> ActionOutcome:
    """One action on its own: a commit group of one."""
    (outcome,) = run_group((action,), ctx)
    if isinstance(outcome, Exception):
        raise outcome
    return outcome


def run_group(actions: tuple[Action, ...], ctx: ActionContext) -> list[ActionOutcome | CompactorError]:
    """Compact actions of one commit group (``group_key``), planned at one snapshot, committed as one snapshot
    by the target's engine: their outcomes in order (an action left out: its error)."""
    _writable(ctx)
    compacts = [a for a in actions if isinstance(a, CompactAction)]
    versions = {a.precondition.table_version for a in compacts}
    if len(compacts) != len(actions) or len(versions) != 1:
        raise ApplyError("an Iceberg commit group holds compact actions planned at one snapshot only")
    planned, table = _read_planned(ctx, versions.pop())
    if ctx.dry_run:
        return [ActionOutcome(details=ActionDetails(dry_run=True)) for _ in actions]
    natives = {uses_native(a) for a in compacts}
    if len(natives) != 1:
        raise ApplyError("an Iceberg commit group runs one method: compactor's rewrite or rewrite_data_files")
    native = natives.pop()
    if ctx.table.engine == "spark":
        from compactor.formats.iceberg.spark_run import run_compact_spark

        if native:
            from compactor.formats.iceberg.spark_native import run_native

            return list(run_native(compacts, ctx, planned, table))
        return list(run_compact_spark(compacts, ctx, planned, table))
    if native:
        raise UnsupportedTableError(f"{ctx.table.name}: {NATIVE_NEEDS_SPARK}",
                                    hint="use a target whose engine is spark, or compaction.method rewrite")
    return run_compact_local(compacts, ctx, planned, table)


#: the group key of compact actions that may share one commit (either engine)
COMPACT_GROUP = "iceberg-compact"


def uses_native(action: Action) -> bool:
    """Whether ``action`` runs as Iceberg's rewrite_data_files: ``method: optimize``. ``auto`` (the default)
    takes compactor's exact-bin rewrite: it rewrites everything the native rewrite can (every format
    version, delete kind, file format and spec) and exactly the planned files."""
    return isinstance(action, CompactAction) and action.method == "optimize"


def group_key(action: Action) -> object:
    """The commit group of ``action``: compactor's rewrite of any compact actions, or one rewrite_data_files
    over the partitions of those with the same sizes (the spark engine's ``method: optimize``)."""
    if not isinstance(action, CompactAction):
        return None
    if uses_native(action):
        return ("iceberg-native", action.target_file_size, action.min_file_size)
    return COMPACT_GROUP
