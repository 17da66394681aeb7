"""Spark Structured Streaming file-sink outputs (parquet plus ``_spark_metadata``): the TableFormat for
format "spark_file_sink"."""

from __future__ import annotations

import datetime as dt
from collections.abc import Collection, Mapping
from typing import Any

from compactor.errors import ApplyError
from compactor.formats.base import ActionContext, ActionOutcome, NoSession, RepairsDuplicates, TableSession
from compactor.models.state import TableState
from compactor.planning.actions import Action
from compactor.planning.plan import TablePlan
from compactor.policy.model import TablePolicy


class FileSinkFormat:
    name = "spark_file_sink"
    marker = "_spark_metadata"  # as registered (compactor/models/formats.py; a test keeps them equal)
    duplicates: RepairsDuplicates | None = None  # a sink's manifest is replaced whole: no duplicate rewrites

    def read_state(self, uri: str, storage_options: Mapping[str, str], policy: TablePolicy | None = None, *,
                   session: TableSession | None = None) -> TableState:
        from compactor.formats.file_sink.state import read_sink_state

        checkpoint = policy.sink.checkpoint if policy is not None and policy.sink is not None else None
        return read_sink_state(uri, storage_options, checkpoint=checkpoint)

    def plan_table(self, policy: TablePolicy, state: TableState, *, now: dt.datetime, engine: str) -> TablePlan:
        from compactor.formats.file_sink.plan import plan_sink_table

        return plan_sink_table(policy, state, now=now, engine=engine)

    def unsupported(self, state: TableState, engine: str) -> str | None:
        return None

    def live_paths(self, state: TableState) -> Collection[str]:
        """Only files listed in the latest .compact may be rewritten."""
        f = state.files
        return frozenset(f.filter(f.column("in_compact")).column("path").to_pylist())

    def run(self, action: Action, ctx: ActionContext) -> ActionOutcome:
        from compactor.formats.file_sink.run import run_sink_action

        return run_sink_action(action, ctx)

    def recover(self, uri: str, storage_options: Mapping[str, str], *, grace_s: float) -> list[str]:
        from compactor.formats.file_sink.location import SinkRoot
        from compactor.formats.file_sink.recovery import recover

        return recover(SinkRoot(uri, storage_options), grace_s)

    def open_session(self, uri: str, storage_options: Mapping[str, str]) -> TableSession:
        return NoSession()  # each sink action reads the manifest itself

    def group_key(self, action: Action, state: TableState, engine: Any, uri: str) -> Any:
        return None  # each sink action swaps the manifest on its own

    def run_group(self, actions: tuple[Action, ...], ctx: ActionContext) -> list[Any]:
        raise ApplyError("file-sink actions are not grouped")

    def simulate(self, action: Action, state: TableState) -> TableState:
        return state


FORMAT = FileSinkFormat()
