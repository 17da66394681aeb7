"""A test format that records the table references compactor hands it (the toy format's code, under its own
name): what a format reaches its catalog by (tests/formats/test_identity.py)."""

from __future__ import annotations

import datetime as dt
from dataclasses import replace

from compactor.formats.base import ActionContext, TableFormat, TableSession
from compactor.models.results import ActionOutcome
from compactor.models.state import TableState
from compactor.models.table import TableLocation
from compactor.planning.actions import Action, CompactAction
from compactor.planning.plan import TablePlan
from compactor.planning.vocabulary import register
from compactor.policy.model import TablePolicy
from tests.formats.contract import toy_format

NAME = "recording"
SPEC = replace(toy_format.SPEC, name=NAME, module=__name__, actions=__name__)

register(NAME, shared=(CompactAction,))


class RecordingFormat(toy_format.ToyFormat):
    name = NAME

    def __init__(self) -> None:
        #: (method, the reference it was given), in call order
        self.seen: list[tuple[str, TableLocation]] = []

    def read_state(self, table: TableLocation, policy: TablePolicy | None = None, *,
                   session: TableSession | None = None) -> TableState:
        self.seen.append(("read_state", table))
        return replace(super().read_state(table, policy, session=session), format=NAME)

    def plan_table(self, policy: TablePolicy, state: TableState, *, now: dt.datetime, engine: str) -> TablePlan:
        return replace(super().plan_table(policy, state, now=now, engine=engine), format=NAME)

    def open_session(self, table: TableLocation) -> TableSession:
        self.seen.append(("open_session", table))
        return super().open_session(table)

    def recover(self, table: TableLocation, *, grace_s: float) -> list[str]:
        self.seen.append(("recover", table))
        return super().recover(table, grace_s=grace_s)

    def run(self, action: Action, ctx: ActionContext) -> ActionOutcome:
        self.seen.append(("run", ctx.location))
        return super().run(action, ctx)


FORMAT: TableFormat = RecordingFormat()
