"""Run a planned ``repair`` action (formats/delta/plan/actions.py RepairAction) on a Delta table.

The repair is derived again from the log window the plan read, and committed only when it is the
reviewed one (same anomalies, same files removed and restored) and its content proof holds
(formats/delta/duplicates/repair.py). Anything else is stale: nothing is committed.
"""

from __future__ import annotations

from compactor.formats.base import ActionContext, ActionOutcome
from compactor.formats.delta.duplicates.repair import repair
from compactor.formats.delta.duplicates.repair_plan import RepairProposal
from compactor.formats.delta.plan.actions import RepairAction
from compactor.models.results import ActionDetails


def reviewed(action: RepairAction) -> RepairProposal:
    """The parts of the proposal the reviewer saw (what the derived repair must equal)."""
    return RepairProposal(anomalies=tuple(action.anomalies), chain=tuple(action.chain), remove=tuple(action.remove),
                          restore=tuple(action.restore), excess=(), keep=(), checked=(),
                          first_version=action.window_start or 0)


def run_repair(action: RepairAction, ctx: ActionContext) -> ActionOutcome:
    result = repair(ctx.location, start=action.window_start, expected=reviewed(action),
                    commit_metadata=ctx.commit_metadata, fence=ctx.fence, dry_run=ctx.dry_run)
    return ActionOutcome(
        files_removed=result.files_removed, files_added=result.files_restored, rows_removed=result.rows_removed,
        rows_added=result.rows_restored, version_before=result.version_before, version_after=result.version_after,
        removed_paths=tuple(action.remove), added_paths=tuple(action.restore),
        details=ActionDetails(repair=result.to_dict()))
