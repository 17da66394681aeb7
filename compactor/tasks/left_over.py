"""The actions a run does not start, left for the next run: reported ``skipped`` with why (the next plan holds
exactly them), and announced through the progress callback."""

from __future__ import annotations

from collections.abc import Sequence

from compactor.models.events import Interrupted, OutOfTime, Progress
from compactor.models.results import ActionDetails, ActionResult
from compactor.planning.actions import Action


def out_of_time(table: str, rest: Sequence[Action], results: list[ActionResult], budget_s: float,
                progress: Progress | None) -> None:
    """max_runtime is over: the actions not started are reported skipped (the next run picks them up)."""
    note = f"max_runtime ({budget_s:.0f}s) was reached before it started; the next run picks it up"
    for a in rest:
        results.append(ActionResult(table, a.type, dict(a.partition), "skipped",
                                    details=ActionDetails(max_runtime=True, note=note)))
    if progress:
        progress(OutOfTime(table, len(rest), budget_s))


def left_for_next_run(table: str, rest: Sequence[Action], results: list[ActionResult],
                      progress: Progress | None) -> None:
    """The run was asked to stop (Ctrl-C): the actions not started are reported skipped, for the next run."""
    note = "the run was interrupted (Ctrl-C) before it started; the next run picks it up"
    for a in rest:
        results.append(ActionResult(table, a.type, dict(a.partition), "skipped", details=ActionDetails(note=note)))
    if progress and rest:
        progress(Interrupted(table, len(rest)))
