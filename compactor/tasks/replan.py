"""apply --replan-stale: a partition whose planned files changed since the plan is planned again, with the
parameters it was planned with, on the state apply read."""

from __future__ import annotations

import datetime as dt

from compactor.errors import StalePlanError
from compactor.models.state import TableState
from compactor.planning.actions import RewriteAction


def replan(action: RewriteAction, state: TableState) -> RewriteAction:
    """Re-plan one stale partition with the parameters it was planned with (the action's own: its
    compaction settings, and every field it carries beside its files)."""
    import pyarrow.compute as pc

    from compactor.planning.partitions import plan_partitions

    mask = None
    for col, val in action.partition.items():
        column = state.files.column(f"partition.{col}")
        m = pc.is_null(column) if val is None else pc.equal(column, val)
        mask = m if mask is None else pc.and_(mask, m)
    files = state.files.filter(mask) if mask is not None else state.files
    actions, _ = plan_partitions(files, state.partition_columns, action.compaction(), now=dt.datetime.now(dt.UTC),
                                 bin_model=action.bin_model, version=state.version, template=action)
    if not actions:
        raise StalePlanError("partition changed since planning and no longer needs compaction")
    return actions[0]
