"""Delta Lake tables: the TableFormat for format "delta"."""

from __future__ import annotations

import datetime as dt
from dataclasses import replace
from typing import Any, Collection, Mapping

from compactor.formats.base import ActionContext, ActionOutcome
from compactor.models.state import TableState
from compactor.planning.actions import Action, SetPropertiesAction
from compactor.planning.plan import TablePlan
from compactor.policy.model import TablePolicy


class DeltaFormat:
    name = "delta"
    marker = "_delta_log"

    def read_state(self, uri: str, storage_options: Mapping[str, str], policy: TablePolicy | None = None, *,
                   cache: dict[str, Any] | None = None) -> TableState:
        from compactor.formats.delta.state import read_delta_state, vacuum_candidates

        state = read_delta_state(uri, storage_options)
        r = policy.retention if policy is not None and policy.enabled else None
        if r is not None and r.vacuum.enabled:
            state = replace(state, vacuum_candidates=vacuum_candidates(uri, storage_options, r.deleted_file_retention))
        return state

    def plan_table(self, policy: TablePolicy, state: TableState, *, now: dt.datetime, engine: str) -> TablePlan:
        from compactor.formats.delta.plan import plan_delta_table

        return plan_delta_table(policy, state, now=now, engine=engine)

    def unsupported(self, state: TableState, engine: str) -> str | None:
        from compactor.formats.delta.plan import unsupported_reason

        return unsupported_reason(state, engine)

    def live_paths(self, state: TableState) -> Collection[str]:
        return state.paths

    def run(self, action: Action, ctx: ActionContext) -> ActionOutcome:
        from compactor.formats.delta.run import run_action

        return run_action(action, ctx)

    def recover(self, uri: str, storage_options: Mapping[str, str], *, grace_s: float) -> list[str]:
        from compactor.formats.delta.run import referenced_paths
        from compactor.runtime.journal import recover

        return recover(uri, lambda since: referenced_paths(uri, storage_options, since), grace_s=grace_s,
                       storage_options=storage_options)

    def simulate(self, action: Action, state: TableState) -> TableState:
        if isinstance(action, SetPropertiesAction):
            return replace(state, properties={**state.properties, **action.properties})
        return state


FORMAT = DeltaFormat()
