"""Spark Structured Streaming file-sink outputs (parquet plus ``_spark_metadata``): the TableFormat for
format "spark_file_sink"."""

from __future__ import annotations

import datetime as dt
from collections.abc import Collection
from typing import TYPE_CHECKING, Any

from compactor.errors import ApplyError
from compactor.formats.base import (
    ActionContext,
    ActionOutcome,
    NoSession,
    RepairsDuplicates,
    TableFormat,
    TableSession,
)
from compactor.formats.file_sink.demo import FileSinkDemo
from compactor.models.report import LogGrowth
from compactor.models.state import TableState
from compactor.models.table import TableLocation
from compactor.models.writer import WriterSettings
from compactor.planning.actions import Action
from compactor.planning.plan import TablePlan
from compactor.policy.model import TablePolicy

if TYPE_CHECKING:  # pragma: no cover
    from compactor.engines.spark_needs import SparkNeeds
    from compactor.formats.demo import DemoTable
    from compactor.models.inspect import ComparedSettings, InspectFindings
    from compactor.project.model import SparkSettings


class FileSinkFormat:
    name = "spark_file_sink"
    duplicates: RepairsDuplicates | None = None  # a sink's manifest is replaced whole: no duplicate rewrites
    libraries: tuple[str, ...] = ()
    demo: DemoTable | None = FileSinkDemo()

    def spark_needs(self, spark: SparkSettings, loads: bool) -> tuple[SparkNeeds, ...]:
        return ()  # Spark's own file sink: no jars, no settings (the writer's are `compactor compile`'s)

    def read_state(self, table: TableLocation, policy: TablePolicy | None = None, *,
                   session: TableSession | None = None) -> TableState:
        from compactor.formats.file_sink.state import read_sink_state

        checkpoint = policy.sink.checkpoint if policy is not None and policy.sink is not None else None
        return read_sink_state(table.uri, table.storage_options, checkpoint=checkpoint)

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

    def recover(self, table: TableLocation, *, grace_s: float) -> list[str]:
        from compactor.formats.file_sink.location import SinkRoot
        from compactor.formats.file_sink.recovery import recover

        return recover(SinkRoot(table.uri, table.storage_options), grace_s)

    def open_session(self, table: TableLocation) -> TableSession:
        return NoSession()  # each sink action reads the manifest itself

    def group_key(self, action: Action, state: TableState, engine: Any, table: TableLocation) -> Any:
        return None  # each sink action swaps the manifest on its own

    def run_group(self, actions: tuple[Action, ...], ctx: ActionContext) -> list[Any]:
        raise ApplyError("file-sink actions are not grouped")

    def simulate(self, action: Action, state: TableState) -> TableState:
        return state

    def state_at(self, table: TableLocation, version: int) -> TableState | None:
        return None  # compactor reads no earlier version of a sink's output

    def inspect_settings(self, policy: TablePolicy) -> ComparedSettings:
        from compactor.formats.file_sink.inspection import inspect_settings

        return inspect_settings(policy)

    def inspect(self, table: TableLocation, state: TableState, *,
                settings: ComparedSettings | None, horizon: int | None) -> InspectFindings:
        from compactor.formats.file_sink.inspection import inspect_sink

        return inspect_sink(table.uri, state, table.storage_options, settings)

    def log_growth(self, table: TableLocation, policy: TablePolicy) -> LogGrowth:
        from compactor.formats.file_sink.inspection import log_growth

        return log_growth(table.uri, table.storage_options, policy.sink.checkpoint if policy.sink is not None else None)

    def writer_settings(self, policy: TablePolicy) -> WriterSettings | None:
        from compactor.formats.file_sink.settings import writer_settings

        return writer_settings(policy)


FORMAT: TableFormat = FileSinkFormat()  # mypy checks the class against the interface
