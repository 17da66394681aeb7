"""Apply Iceberg's own maintenance actions (maintenance_actions.py) with the spark engine, through Iceberg's
Spark actions in the run's one session (``SparkActions.get(spark)``): ``rewritePositionDeletes`` filtered to
the planned partition with ``rewrite-all``, ``rewriteManifests`` for the planned partition spec. The local
engine refuses both, naming the spark engine: pyiceberg 0.12 rewrites neither delete files nor manifests.

Before the action runs (then the fence): the listed files must be what the planned snapshot held (else the
plan was edited: PlanError), and the table as it is now must still hold exactly them: every listed
position delete file live and no other in the partition (Iceberg's filter, evaluated by Iceberg's own
position-deletes scan, selects exactly the listed files), or the current snapshot's manifests of the spec
exactly the planned snapshot's. Otherwise the action is stale and nothing runs. The Java table is
refreshed once, and both the check and Iceberg's action read that same metadata (the action plans from the
table's loaded snapshot without reading it again), so what is rewritten is what was checked; a commit
landing meanwhile is kept by Iceberg's commit, which applies the rewrite on top of it.

After it committed (its snapshot found by the run's commit properties, which it carries), from metadata and
Spark: the rows Spark reads after deletes at the new snapshot equal those at its parent; no data file was
added or removed; a position delete rewrite removed exactly the listed files and added delete files in their
partition only; a manifest rewrite changed no delete file and left none of the listed manifests in the
snapshot. A failed check is a VerificationError naming both snapshots (the commit stands: roll back with
Iceberg's ``rollback_to_snapshot``). Iceberg's action deletes what it wrote when its commit fails; a run
killed meanwhile leaves unreferenced files that ``remove_orphan_files`` deletes."""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

from compactor.errors import ApplyError, PlanError, StalePlanError, UnsupportedTableError, VerificationError
from compactor.formats.base import ActionContext, ActionOutcome
from compactor.formats.iceberg.maintenance_actions import (
    IcebergMaintenanceAction,
    RewriteManifestsAction,
    RewritePositionDeletesAction,
)
from compactor.formats.iceberg.maintenance_plan import rewritten_manifests
from compactor.formats.iceberg.native_scope import ScopeProblem, partition_scope
from compactor.formats.iceberg.spark import committed_snapshot, java_commit_failure, java_table
from compactor.formats.iceberg.spark_filter import IcebergFilter
from compactor.formats.iceberg.spark_rewrite import check_runtime
from compactor.formats.iceberg.state import IcebergState, state_of
from compactor.models.results import ActionDetails
from compactor.runtime.faults import crash_point

if TYPE_CHECKING:
    from pyiceberg.table import Table


def run_maintenance(action: IcebergMaintenanceAction, ctx: ActionContext, planned: IcebergState,
                    table: Table) -> ActionOutcome:
    """Run ``action`` (module docstring), planned at the snapshot ``planned`` was read at."""
    name = planned.identifier
    if ctx.table.engine != "spark":
        raise UnsupportedTableError(f"{name}: {action.type} runs on the spark engine only (Iceberg's own Spark "
                                    "action): pyiceberg 0.12 rewrites neither delete files nor manifests; nothing "
                                    "was committed", hint="apply with a target whose engine is spark")
    if ctx.dry_run:
        return ActionOutcome(details=ActionDetails(dry_run=True))
    spark = getattr(ctx.engine(), "spark", None)
    if spark is None:
        raise ApplyError(f"{name}: the spark engine has no Spark session for Iceberg's {action.type}")
    check_runtime(spark)
    problem = _edited(action, planned)
    if problem is not None:
        raise PlanError(f"{name}: {action.type}: {problem}: the plan was edited", hint="re-run `compactor plan`")
    with java_table(spark, ctx.location) as jtable:
        return _run(action, ctx, planned, table, spark, jtable)


def _edited(action: IcebergMaintenanceAction, planned: IcebergState) -> str | None:
    """How the action's files differ from what the planned snapshot held for it, or None."""
    if isinstance(action, RewritePositionDeletesAction):
        listed = [d for d in planned.delete_files if d.path in set(action.files)]
        if len(listed) != len(action.files) or any(d.kind != "position" for d in listed):
            return "it lists files that were no position delete files of the planned snapshot"
        keys = {d.partition_key for d in listed}
        if len(keys) != 1 or next(iter(keys))[0] != action.spec_id:
            return f"its files are not of one partition of spec {action.spec_id}"
        key = keys.pop()
        if {d.path for d in planned.delete_files if d.kind == "position" and d.partition_key == key} != set(action.files):
            return "it does not list every position delete file of its partition"
        return None
    want = rewritten_manifests([m for m in planned.manifests if m.spec_id == action.spec_id], planned.properties)
    if {m.path for m in want} != set(action.files):
        return f"its manifests are not those Iceberg rewrites for spec {action.spec_id} at the planned snapshot"
    return None


def _stale(action: IcebergMaintenanceAction, planned: IcebergState, current: IcebergState) -> str | None:
    """Why the table as it is now no longer holds exactly the action's inputs, or None."""
    if isinstance(action, RewritePositionDeletesAction):
        key = next(d.partition_key for d in planned.delete_files if d.path == action.files[0])
        now = {d.path for d in current.delete_files if d.kind == "position" and d.partition_key == key}
        gone, new = set(action.files) - now, now - set(action.files)
        if gone or new:
            return (f"the partition's position delete files changed since planning: {len(gone)} listed file(s) "
                    f"no longer live, {len(new)} new (e.g. {sorted(gone or new)[0]})")
        return None
    was = {m.path for m in planned.manifests if m.spec_id == action.spec_id}
    now = {m.path for m in current.manifests if m.spec_id == action.spec_id}
    if was != now:
        return (f"the current snapshot's manifests of spec {action.spec_id} are not the planned snapshot's: "
                f"{len(was - now)} gone, {len(now - was)} new")
    return None


def _run(action: IcebergMaintenanceAction, ctx: ActionContext, planned: IcebergState, table: Table, spark: Any,
         jtable: Any) -> ActionOutcome:
    name = planned.identifier
    table.refresh()
    jtable.refresh()  # Iceberg's action plans from this metadata: the one checked here (not read again)
    before = state_of(table, name)
    java_head = jtable.currentSnapshot()
    stale = _stale(action, planned, before)
    if stale is None and (java_head is None or int(java_head.snapshotId()) != before.snapshot_id):
        stale = "the table changed while its inputs were being checked"
    if stale is not None:
        raise StalePlanError(f"{name}: {action.type} not run, the plan is stale: {stale}; nothing was committed",
                             hint="plan again")
    actions = spark._jvm.org.apache.iceberg.spark.actions.SparkActions.get(spark._jsparkSession)
    if isinstance(action, RewritePositionDeletesAction):
        expression = _partition_filter(spark, planned, action)
        scoped = _scoped_deletes(spark, jtable, expression)
        if scoped != set(action.files):
            raise StalePlanError(f"{name}: {action.type} not run: Iceberg's filter for the partition selects "
                                 f"{len(scoped)} position delete file(s), not the {len(action.files)} listed; nothing "
                                 "was committed", hint="plan again")
        job = actions.rewritePositionDeletes(jtable).filter(expression).option("rewrite-all", "true")
    else:
        job = actions.rewriteManifests(jtable).specId(action.spec_id)
    for k, v in ctx.commit_metadata.items():
        job = job.snapshotProperty(k, v)
    crash_point("iceberg.maintenance_checked")
    if ctx.fence is not None:
        ctx.fence()
    try:
        result = job.execute()
    except Exception as e:  # noqa: BLE001 - py4j wraps the JVM's exception; its class name says which
        failure = java_commit_failure(e)
        if failure.stale:
            raise StalePlanError(f"{name}: {action.type} not committed, the plan is stale: {failure.first}",
                                 hint="plan again") from None
        raise ApplyError(f"{name}: Iceberg's {action.type} failed: {failure.first}; nothing was committed") from None
    return _verified(action, ctx, table, spark, jtable, result)


def _partition_filter(spark: Any, planned: IcebergState, action: RewritePositionDeletesAction) -> Any:
    """Iceberg's expression selecting the action's partition: each field's transform of its source column
    equal to the partition's value (or null)."""
    delete = next(d for d in planned.delete_files if d.path == action.files[0])
    try:
        scope = partition_scope(planned, action.spec_id, delete.partition, delete.path)
    except ScopeProblem as e:
        raise UnsupportedTableError(f"{planned.identifier}: {e}; nothing was committed") from None
    return IcebergFilter(spark._jvm).of([scope])


def _scoped_deletes(spark: Any, jtable: Any, expression: Any) -> set[str]:
    """The position delete files (not deletion vectors) the filter selects in the table's current snapshot,
    by Iceberg's own position-deletes scan (what its rewrite plans from)."""
    jvm = spark._jvm
    deletes = jvm.org.apache.iceberg.MetadataTableUtils.createMetadataTableInstance(
        jtable, jvm.org.apache.iceberg.MetadataTableType.POSITION_DELETES)
    tasks = jvm.org.apache.iceberg.relocated.com.google.common.collect.Lists.newArrayList(
        deletes.newBatchScan().baseTableFilter(expression).planFiles())
    return {str(t.file().location()) for t in tasks if str(t.file().format()) != "PUFFIN"}


def _committed(jtable: Any, properties: Mapping[str, str], where: str) -> tuple[int, int]:
    """(the snapshot the action committed, its parent): the newest in the current history whose summary
    holds ``properties``."""
    snapshot = committed_snapshot(jtable, properties)
    if snapshot is None or snapshot.parentId() is None:
        raise ApplyError(f"{where}: the action's snapshot is not in the table's history after its commit")
    return int(snapshot.snapshotId()), int(snapshot.parentId())


def _rows(spark: Any, jtable: Any, snapshot_id: int) -> int:
    """Rows Spark reads at ``snapshot_id``, deletes applied (the table through its current metadata file)."""
    location = str(jtable.operations().current().metadataFileLocation())
    return int(spark.read.format("iceberg").option("versionAsOf", str(snapshot_id)).load(location).count())


def _verified(action: IcebergMaintenanceAction, ctx: ActionContext, table: Table, spark: Any, jtable: Any,
              result: Any) -> ActionOutcome:
    """The action's outcome, once what it committed is checked (module docstring)."""
    where = ctx.location.identifier or ctx.location.uri
    name = str(where)
    if isinstance(action, RewritePositionDeletesAction) and int(result.rewrittenDeleteFilesCount()) == 0:
        raise VerificationError(f"{name}: Iceberg's {action.type} rewrote nothing (it found no file to rewrite)")
    if isinstance(action, RewriteManifestsAction) and not list(result.rewrittenManifests()):
        raise VerificationError(f"{name}: Iceberg's {action.type} rewrote no manifest")
    ours, parent = _committed(jtable, ctx.commit_metadata, name)
    table.refresh()
    after, prior = state_of(table, name, ours), state_of(table, name, parent)
    problems: list[str] = []
    rows_before, rows_after = _rows(spark, jtable, parent), _rows(spark, jtable, ours)
    if rows_before != rows_after:
        problems.append(f"Spark reads {rows_after} rows, {rows_before} before")
    if {f.path for f in after.files} != {f.path for f in prior.files} or after.totals.records != prior.totals.records:
        problems.append("its data files or their record counts differ from the snapshot before")
    deletes_before = {d.path: d for d in prior.delete_files}
    deletes_after = {d.path: d for d in after.delete_files}
    removed = sorted(set(deletes_before) - set(deletes_after))
    added = sorted(set(deletes_after) - set(deletes_before))
    if isinstance(action, RewritePositionDeletesAction):
        key = deletes_before[action.files[0]].partition_key if action.files[0] in deletes_before else None
        if set(removed) != set(action.files):
            problems.append(f"it removed {len(removed)} delete file(s), not the {len(action.files)} listed")
        if any(deletes_after[p].partition_key != key for p in added):
            problems.append("it added delete files outside the planned partition")
    else:
        if removed or added:
            problems.append(f"it removed {len(removed)} and added {len(added)} delete file(s)")
        left = set(action.files) & {m.path for m in after.manifests}
        if left:
            problems.append(f"{len(left)} listed manifest(s) are still in its snapshot")
    if problems:
        raise VerificationError(f"{name}: the {action.type} committed as snapshot {ours} (parent {parent}) does "
                                f"not check out: {'; '.join(problems)}",
                                hint=f"inspect the table; CALL <catalog>.system.rollback_to_snapshot(..., {parent}) "
                                     "undoes it")
    if isinstance(action, RewritePositionDeletesAction):
        return ActionOutcome(
            files_removed=len(removed), files_added=len(added),
            bytes_removed=sum(deletes_before[p].size for p in removed),
            bytes_added=sum(deletes_after[p].size for p in added), rows_removed=rows_before, rows_added=rows_after,
            version_before=parent, version_after=ours, removed_paths=tuple(removed), added_paths=tuple(added),
            details=ActionDetails(method="Iceberg rewritePositionDeletes", files=removed, file_count=len(removed)))
    gone = [str(m.path()) for m in result.rewrittenManifests()]
    new = [str(m.path()) for m in result.addedManifests()]
    sizes = {m.path: m.length for m in prior.manifests}
    return ActionOutcome(
        files_removed=len(gone), files_added=len(new), bytes_removed=sum(sizes.get(p, 0) for p in gone),
        bytes_added=sum(m.length for m in after.manifests if m.path in set(new)), rows_removed=rows_before,
        rows_added=rows_after, version_before=parent, version_after=ours,
        details=ActionDetails(method="Iceberg rewriteManifests", files=sorted(gone), file_count=len(gone),
                              note=f"{len(gone)} manifest(s) -> {len(new)}"))
