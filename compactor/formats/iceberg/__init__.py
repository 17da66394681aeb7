"""Apache Iceberg tables, through pyiceberg (no JVM): the TableFormat for format "iceberg". A table is named
by a catalog of the target and its identifier there (catalog.py: SQL and REST catalogs); its state is read
from its manifests (state.py, live.py, read.py), planned per partition of each spec (plan.py, its words in
actions.py), rewritten bin by bin with the local engine (rewrite.py, support.py) and committed as one
``replace`` snapshot per action, validated from the planned snapshot (replace.py, the one module pinned to
pyiceberg's private API); run.py journals it (recovery.py, references.py: the deletion gate). The spark
engine rewrites each bin through Iceberg's own Spark rewrite and commits through its ``RewriteFiles``
(spark.py: the session's needs and the Java table; spark_rewrite.py, the one module pinned to Iceberg's
runtime; spark_run.py), or, with ``compaction.method: optimize``, runs Iceberg's own RewriteDataFiles scoped
to the planned partitions (spark_native.py, native_scope.py). Its own maintenance (position delete files and
manifests rewritten by Iceberg's Spark actions: maintenance_actions.py, maintenance_plan.py,
maintenance_run.py) and its retention (retention_*.py, expire.py) are planned after the compaction."""

from __future__ import annotations

import datetime as dt
from collections.abc import Collection
from typing import TYPE_CHECKING, Any

from compactor.formats.base import (
    ActionContext,
    ActionOutcome,
    NoSession,
    RepairsDuplicates,
    TableFormat,
    TableSession,
)
from compactor.models.state import TableState
from compactor.models.table import TableLocation
from compactor.planning.actions import Action
from compactor.planning.plan import TablePlan
from compactor.policy.model import TablePolicy

if TYPE_CHECKING:  # pragma: no cover
    from compactor.engines.spark_needs import SparkNeeds
    from compactor.formats.demo import DemoTable
    from compactor.models.inspect import ComparedSettings, InspectFindings
    from compactor.models.report import LogGrowth
    from compactor.models.writer import WriterSettings
    from compactor.project.model import SparkSettings


class IcebergFormat:
    name = "iceberg"
    duplicates: RepairsDuplicates | None = None  # a snapshot replaces files by identity: no duplicate rewrites
    libraries: tuple[str, ...] = ("pyiceberg",)
    demo: DemoTable | None = None

    def spark_needs(self, spark: SparkSettings, loads: bool) -> tuple[SparkNeeds, ...]:
        from compactor.formats.iceberg.spark import spark_needs

        return spark_needs(loads)

    def read_state(self, table: TableLocation, policy: TablePolicy | None = None, *,
                   session: TableSession | None = None) -> TableState:
        from compactor.formats.iceberg.read import read_iceberg_state
        from compactor.formats.iceberg.retention_read import with_retention_facts

        state, handle = read_iceberg_state(table)
        planning = policy is not None and policy.enabled and session is None  # (apply reads what it runs)
        return with_retention_facts(state, handle, table, policy.retention) if planning and policy else state

    def open_session(self, table: TableLocation) -> TableSession:
        return NoSession()  # each action loads the table from its catalog at the planned snapshot

    def plan_table(self, policy: TablePolicy, state: TableState, *, now: dt.datetime, engine: str) -> TablePlan:
        from compactor.formats.iceberg.plan import plan_iceberg_table

        return plan_iceberg_table(policy, state, now=now, engine=engine)

    def unsupported(self, state: TableState, engine: str) -> str | None:
        from compactor.formats.iceberg.plan import unsupported_reason
        from compactor.formats.iceberg.read import iceberg_state

        return unsupported_reason(iceberg_state(state), engine)

    def live_paths(self, state: TableState) -> Collection[str]:
        return state.paths

    def run(self, action: Action, ctx: ActionContext) -> ActionOutcome:
        from compactor.formats.iceberg.run import run_action

        return run_action(action, ctx)

    def group_key(self, action: Action, state: TableState, engine: Any, table: TableLocation) -> Any:
        from compactor.formats.iceberg.run import group_key

        # either engine commits a group's bins as one snapshot (run.py run_group); method optimize: one
        # rewrite_data_files per group on the spark engine (the local engine refuses it)
        return group_key(action)

    def run_group(self, actions: tuple[Action, ...], ctx: ActionContext) -> list[Any]:
        from compactor.formats.iceberg.run import run_group

        return list(run_group(actions, ctx))

    def recover(self, table: TableLocation, *, grace_s: float) -> list[str]:
        from compactor.formats.iceberg.recovery import recover

        return recover(table, grace_s)

    def simulate(self, action: Action, state: TableState) -> TableState:
        return state

    def state_at(self, table: TableLocation, version: int) -> TableState | None:
        from compactor.formats.iceberg.read import read_iceberg_state

        return read_iceberg_state(table, version)[0]

    def inspect_settings(self, policy: TablePolicy) -> ComparedSettings:
        from compactor.models.inspect import FileSizeSettings

        return FileSizeSettings(policy.compaction.min_file_size)

    def inspect(self, table: TableLocation, state: TableState, *,
                settings: ComparedSettings | None, horizon: int | None) -> InspectFindings:
        from compactor.models.inspect import InspectFindings

        return InspectFindings()  # its snapshots and delete files come with the inspect slice

    def log_growth(self, table: TableLocation, policy: TablePolicy) -> LogGrowth:
        from compactor.models.report import LogGrowth

        return LogGrowth()

    def writer_settings(self, policy: TablePolicy) -> WriterSettings | None:
        return None


FORMAT: TableFormat = IcebergFormat()  # mypy checks the class against the interface
