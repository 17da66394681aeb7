"""Table maintenance: VACUUM (delta-spark when its SQL is available, else delta-rs) and table properties."""


from __future__ import annotations

import logging
from typing import Any

from compactor.errors import (
    ApplyError,
)
from compactor.formats.base import ActionContext, ActionOutcome
from compactor.formats.delta.context import SqlEngine, check_writable, fence, handle
from compactor.models.results import ActionDetails
from compactor.planning.actions import (
    SetPropertiesAction,
    VacuumAction,
)
from compactor.planning.retention import DELETED, parse_interval

log = logging.getLogger(__name__)


def vacuum(action: VacuumAction, ctx: ActionContext) -> ActionOutcome:
    dt = handle(ctx)
    hours = int(action.retention_hours)
    # the state, not the handle: in a dry run, a set_properties planned before this action has not run
    declared = parse_interval(ctx.state.properties.get(DELETED))
    table_secs = 7 * 86400 if declared is None else declared  # Delta's default; 0 is a valid value
    if hours * 3600 < table_secs:
        # never below what the table declares (delta-rs would refuse too; say why clearly)
        raise ApplyError(f"vacuum retention {hours}h is below the table's {DELETED} ({table_secs // 3600}h)",
                         hint="apply the set_properties action first or raise the policy's retention")
    engine: Any = ctx.engine() if ctx.target.engine == "spark" else None
    if isinstance(engine, SqlEngine) and engine.delta_sql_available() \
            and engine.native_commits_safe(ctx.table.path):
        from compactor.engines.spark import vacuum_sql

        # VACUUM reports the files it would delete only in a dry run
        path = engine.hadoop_path(ctx.table.path)
        candidates = [r[0] for r in engine.sql(vacuum_sql(path, hours, True))]
        if not ctx.dry_run:
            fence(ctx)
            engine.sql(vacuum_sql(path, hours, False))
        return ActionOutcome(files_removed=0 if ctx.dry_run else len(candidates), version_before=ctx.state.version,
                             version_after=handle(ctx).version(),
                             details=ActionDetails(dry_run=ctx.dry_run, files=sorted(candidates)[:1000],
                                                   file_count=len(candidates), engine="delta-spark"))
    check_writable(ctx)
    # checked above against the (possibly simulated) table property; delta-rs would check the stored one
    if not ctx.dry_run:
        fence(ctx)
    files = dt.vacuum(retention_hours=hours, dry_run=ctx.dry_run, enforce_retention_duration=not ctx.dry_run)
    return ActionOutcome(files_removed=0 if ctx.dry_run else len(files), version_before=ctx.state.version,
                         version_after=dt.version(),
                         details=ActionDetails(dry_run=ctx.dry_run, files=sorted(files)[:1000], file_count=len(files)))


def set_properties(action: SetPropertiesAction, ctx: ActionContext) -> ActionOutcome:
    check_writable(ctx)
    dt = handle(ctx)
    before = dt.version()
    props = {k: str(v) for k, v in action.properties.items()}
    if not ctx.dry_run:
        fence(ctx)
        dt.alter.set_table_properties(props, raise_if_not_exists=False)
    return ActionOutcome(version_before=before, version_after=handle(ctx).version(),
                         details=ActionDetails(properties=props, dry_run=ctx.dry_run))
