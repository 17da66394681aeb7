"""Run one planned action on a Delta table.

Rewrites (compact, sort) go through one pipeline on both engines: a journal names every output before
anything is written, the engine writes exactly one file per planned bin, rows are verified from the
parquet footers (rows removed == rows added, per bin) before anything is committed, one dataChange=false
commit swaps the files (formats/delta/apply/commit.py), and the overlap guard undoes the commit at once if a
concurrent compaction removed the same inputs (formats/delta/apply/guard.py).

Z-order uses delta-rs' optimize on the local engine (compactor has no z-order curve of its own) and
delta-spark OPTIMIZE ZORDER BY on the spark engine. ``method: optimize`` (or ``auto`` when the Delta
jars load) runs delta-spark's native OPTIMIZE instead of the rewrite.
"""


from __future__ import annotations

import logging
from collections.abc import Sequence

from compactor.engines.sql_engine import SqlEngine
from compactor.errors import (
    ApplyError,
    CompactorError,
    UnsupportedTableError,
)
from compactor.formats.base import ActionContext, ActionOutcome
from compactor.formats.delta.apply.context import REWRITE_GROUP, group_key, uses_native
from compactor.formats.delta.apply.maintenance import set_properties, vacuum
from compactor.formats.delta.apply.native import (
    native_optimize,
    native_optimize_group,
    partition_filters,
    z_order_delta_rs,
)
from compactor.formats.delta.apply.rewrite import rewrite_group
from compactor.formats.delta.plan.actions import RepairAction, SetPropertiesAction, VacuumAction
from compactor.formats.delta.plan.purge_action import PurgeAction
from compactor.formats.delta.plan.support import unsupported_reason
from compactor.planning.actions import Action, RewriteAction, ZOrderAction

log = logging.getLogger(__name__)


def run_action(action: Action, ctx: ActionContext) -> ActionOutcome:
    if isinstance(action, RepairAction):
        from compactor.formats.delta.duplicates.repair_action import run_repair

        return run_repair(action, ctx)
    if isinstance(action, VacuumAction):
        return _recorded_vacuum(action, ctx)
    if isinstance(action, SetPropertiesAction):
        return set_properties(action, ctx)
    if isinstance(action, PurgeAction):
        from compactor.formats.delta.apply.purge import run_purge

        return run_purge(action, ctx)
    if not isinstance(action, RewriteAction):
        raise ApplyError(f"{action.type} is not an action for Delta tables")
    engine = ctx.engine()
    if uses_native(action, engine, ctx.table.path, ctx.state):
        return native_optimize(action, ctx, engine)
    if isinstance(action, ZOrderAction):
        if isinstance(engine, SqlEngine):
            raise UnsupportedTableError("z-order on the spark engine needs the Delta jars (compaction.method: "
                                        "optimize) - or use the local engine, which z-orders with delta-rs")
        return z_order_delta_rs(action, ctx)
    reason = unsupported_reason(ctx.state, engine.name)
    if reason:
        hint = ("load the Delta jars into the Spark session (profile spark.delta_jars) so that delta-spark's "
                "OPTIMIZE compacts it" if isinstance(engine, SqlEngine) else None)
        raise UnsupportedTableError(f"{ctx.table.name}: {reason}", hint=hint)
    (result,) = rewrite_group([action], ctx, engine)
    if isinstance(result, CompactorError):
        raise result
    return result


def _recorded_vacuum(action: VacuumAction, ctx: ActionContext) -> ActionOutcome:
    """A VACUUM, in the table's history as delta-spark records its own: delta-spark's VACUUM writes its
    VACUUM START and VACUUM END itself; where compactor deletes the listed files itself it writes them, once
    the delete is done (START with the time it began, how many files it listed; END with how many it
    deleted and from how many folders)."""
    import time

    from compactor.formats.delta.apply.commit import MARKER
    from compactor.formats.delta.apply.context import handle
    from compactor.formats.delta.apply.log_writer import empty_commit, vacuum_end, vacuum_start
    from compactor.formats.delta.plan.retention import DELETED, parse_interval

    began = int(time.time() * 1000)
    outcome = vacuum(action, ctx)
    if ctx.dry_run or outcome.details.engine == "delta-spark":
        return outcome
    try:
        dt = handle(ctx)
        default_s = parse_interval(dt.metadata().configuration.get(DELETED)) or 7 * 86400
        deleted = outcome.details.file_count or 0
        folders = len({f.rpartition("/")[0] for f in outcome.details.files or ()})
        listed = len(action.files) if action.files is not None else deleted
        marker = ctx.commit_metadata.get(MARKER, "compactor")
        for op, at, step in ((vacuum_start(listed, action.retention_hours, default_s * 1000), began, "start"),
                             (vacuum_end(deleted, folders), None, "end")):
            empty_commit(dt, ctx.location, op, {**ctx.commit_metadata, MARKER: f"{marker}:vacuum-{step}"}, at_ms=at)
    except Exception as e:  # noqa: BLE001 - the files are deleted; the history entry is a record of it
        log.warning("%s: the VACUUM's START/END commits were not written: %s", ctx.table.name, e)
    return outcome


def run_group(actions: Sequence[Action], ctx: ActionContext) -> list[ActionOutcome | CompactorError]:
    """Consecutive actions of one group key, committed together (partial progress per group): their bins
    rewritten at once by compactor's pipeline, or one delta-spark OPTIMIZE over their partitions. Per
    action: its outcome, or the error that kept it out of the commit (stale: an input was removed by a
    concurrent commit). Rows are verified per bin before the commit; a mismatch anywhere commits
    nothing (VerificationError)."""
    engine = ctx.engine()
    keys = {group_key(a, ctx.state, engine, ctx.table.path) for a in actions}
    if len(keys) != 1 or None in keys:
        raise ApplyError(f"actions of partitions {[dict(a.partition) for a in actions]} cannot share a commit")
    rewrites: list[RewriteAction] = list(actions)  # type: ignore[arg-type]
    if keys != {REWRITE_GROUP}:
        return native_optimize_group(rewrites, ctx, engine)  # type: ignore[return-value]
    return rewrite_group(rewrites, ctx, engine)


# the names other modules and tests import from here
__all__ = ["group_key", "partition_filters", "run_action", "run_group"]
