"""Delta Lake tables: the TableFormat for format "delta"."""

from __future__ import annotations

import datetime as dt
import logging
from collections.abc import Callable, Collection, Mapping
from dataclasses import replace
from typing import TYPE_CHECKING, Any

from compactor.formats.base import (
    ActionContext,
    ActionOutcome,
    RepairOutcome,
    RepairsDuplicates,
    TableFormat,
    TableSession,
)
from compactor.formats.delta.demo import DeltaDemo
from compactor.formats.delta.plan.actions import SetPropertiesAction
from compactor.formats.delta.read.facts import DuplicateFacts, delta_facts
from compactor.models.state import TableState
from compactor.models.table import TableLocation
from compactor.planning.actions import Action, RewriteAction
from compactor.planning.plan import TablePlan
from compactor.policy.model import TablePolicy

if TYPE_CHECKING:  # the inspect, report and writer models are loaded by the commands that use them
    from compactor.engines.spark_needs import SparkNeeds
    from compactor.formats.delta.duplicates.detection import Detection
    from compactor.formats.delta.read.log import Commit
    from compactor.formats.demo import DemoTable
    from compactor.models.inspect import ComparedSettings, InspectFindings
    from compactor.models.report import LogGrowth
    from compactor.models.writer import WriterSettings
    from compactor.project.model import SparkSettings


def duplicate_facts(table: TableLocation, version: int | None,
                    known: Mapping[int, Commit] | None = None) -> DuplicateFacts:
    """For the planner: the rows live twice (reported per anomaly), the files holding their extra copies
    (never planned as compaction inputs) and the repair to plan first. ``known``: commits already parsed."""
    from compactor.formats.delta.duplicates.detection import detect

    try:
        found = detect(table, version=version, known=known)
    except Exception as e:  # noqa: BLE001 - the plan says it could not look, and goes on
        logging.getLogger(__name__).warning("%s: could not scan the log for rows live twice: %s", table.uri, e)
        return DuplicateFacts(scan_error=f"{type(e).__name__}: {e}")
    return _facts_of(found)


def _facts_of(found: Detection) -> DuplicateFacts:
    current = found.current
    if found.proposal is not None and not found.proposal.repairable:
        why = "; ".join(found.proposal.problems)
        current = [replace(d, repairable=False, reason=d.reason or why) for d in current]
    facts = DuplicateFacts(reports=tuple(current), carriers=frozenset(found.carriers))
    if found.proposal is not None and found.proposal.repairable:
        facts = replace(facts, proposal=found.proposal, window_start=found.first_version,
                        rows=(sum(found.rows.get(p) or 0 for p in found.proposal.remove),
                              sum(found.rows.get(p) or 0 for p in found.proposal.restore)))
    return facts


def newest_duplicate_facts(table: TableLocation) -> tuple[int, DuplicateFacts] | None:
    """``duplicate_facts`` at the newest commit listed in the log now, with that version: planning runs
    it while delta-rs loads the table (which releases the GIL), and takes it when the state delta-rs read
    is at that version (the same window, read and replayed alike). None when the log cannot be listed or
    scanned here: ``duplicate_facts`` then runs after the load, and reports any error itself."""
    from compactor.formats.delta.duplicates.detection import detect, newest_window

    window = newest_window(table)
    if window is None:
        return None
    if window.commits is None:  # no commit of the window may be a rewrite: no anomaly in it
        return window.version, DuplicateFacts()
    try:
        return window.version, _facts_of(detect(table, version=window.version, known=window.commits))
    except Exception as e:  # noqa: BLE001 - only a head start: duplicate_facts runs again and reports it
        logging.getLogger(__name__).debug("%s: no head start on the scan for rows live twice: %s", table.uri, e)
        return None


class DeltaDuplicates:
    """Rows live twice (formats/delta/duplicates/detection.py, repair.py): the RepairsDuplicates of format "delta"."""

    def repair_duplicates(self, table: TableLocation, *, horizon: int | None = None,
                          commit_metadata: Mapping[str, str] | None = None, dry_run: bool = False,
                          expected: object | None = None, fence: Callable[[], None] | None = None) -> RepairOutcome:
        """Repair the rows live twice (a repair.RepairResult; RepairError if they cannot be)."""
        from compactor.formats.delta.duplicates.detection import DEFAULT_HORIZON
        from compactor.formats.delta.duplicates.repair import repair
        from compactor.formats.delta.duplicates.repair_plan import RepairProposal

        if expected is not None and not isinstance(expected, RepairProposal):
            raise TypeError(f"expected: a RepairProposal, not {type(expected).__name__}")
        return repair(table, horizon=horizon or DEFAULT_HORIZON, commit_metadata=commit_metadata,
                      dry_run=dry_run, expected=expected, fence=fence)

    def removals_after(self, table: TableLocation, version: int) -> tuple[int, dict[str, list[int]]]:
        """(last version, {path: versions that removed it}) of the commits after ``version`` (the watch)."""
        from compactor.formats.delta.duplicates.detection import removals_after

        return removals_after(table, version)


class DeltaFormat:
    name = "delta"
    duplicates: RepairsDuplicates | None = DeltaDuplicates()
    libraries: tuple[str, ...] = ("deltalake",)
    demo: DemoTable | None = DeltaDemo()

    def spark_needs(self, spark: SparkSettings, loads: bool) -> tuple[SparkNeeds, ...]:
        from compactor.formats.delta.spark import spark_needs

        return spark_needs(spark.delta_jars, loads)

    def read_state(self, table: TableLocation, policy: TablePolicy | None = None, *,
                   session: TableSession | None = None) -> TableState:
        from compactor.formats.delta.apply.session import DeltaSession
        from compactor.formats.delta.plan.retention import vacuum_retention_hours
        from compactor.formats.delta.read.state import read_delta_state
        from compactor.formats.delta.read.vacuum_listing import vacuum_candidates

        planning = policy is not None and policy.enabled and session is None
        early: tuple[int, DuplicateFacts] | None = None
        if isinstance(session, DeltaSession):  # apply: the actions use the table loaded here
            state = read_delta_state(table, table=session.open_table())
        elif planning:  # the scan for rows live twice runs while delta-rs loads
            from concurrent.futures import ThreadPoolExecutor

            with ThreadPoolExecutor(1, thread_name_prefix="delta-state") as pool:
                loading = pool.submit(read_delta_state, table)
                early = newest_duplicate_facts(table)
                state = loading.result()
        else:
            state = read_delta_state(table)
        facts = delta_facts(state)
        r = policy.retention if policy is not None and policy.enabled else None
        if r is not None and r.vacuum.enabled:
            facts = replace(facts, vacuum_candidates=vacuum_candidates(table, vacuum_retention_hours(r)))
        if planning and policy is not None and policy.compaction.purge.enabled and facts.deleted_rows:
            from compactor.formats.delta.read.extra_columns import beside_deletion_vectors

            facts = replace(facts, extra_columns=beside_deletion_vectors(table, state))
        if planning:  # (apply runs the planned repair)
            facts = replace(facts, duplicates=early[1] if early is not None and early[0] == state.version
                            else duplicate_facts(table, state.version))
        return state if facts is state.extra else replace(state, extra=facts)

    def plan_table(self, policy: TablePolicy, state: TableState, *, now: dt.datetime, engine: str) -> TablePlan:
        from compactor.formats.delta.plan.planner import plan_delta_table

        return plan_delta_table(policy, state, now=now, engine=engine)

    def unsupported(self, state: TableState, engine: str) -> str | None:
        from compactor.formats.delta.plan.support import unsupported_reason

        return unsupported_reason(state, engine)

    def live_paths(self, state: TableState) -> Collection[str]:
        return state.paths

    def run(self, action: Action, ctx: ActionContext) -> ActionOutcome:
        from compactor.formats.delta.run import run_action

        return run_action(action, ctx)

    def group_key(self, action: Action, state: TableState, engine: Any, table: TableLocation) -> Any:
        from compactor.formats.delta.run import group_key

        return group_key(action, state, engine(), table.uri) if isinstance(action, RewriteAction) else None

    def run_group(self, actions: tuple[Action, ...], ctx: ActionContext) -> list[Any]:
        from compactor.formats.delta.run import run_group

        return run_group(actions, ctx)

    def recover(self, table: TableLocation, *, grace_s: float) -> list[str]:
        from compactor.formats.delta.apply.native import written_by_delta_rs
        from compactor.formats.delta.read.references import references
        from compactor.runtime.journal import recover

        # every file the log references now, every tombstone counted (no retention: that is VACUUM's), and
        # every file a commit since the dead runs' read versions named
        return recover(table.uri, lambda since: references(table, named_since=since), grace_s=grace_s,
                       storage_options=table.storage_options, engine_wrote=written_by_delta_rs)

    def open_session(self, table: TableLocation) -> TableSession:
        from compactor.formats.delta.apply.session import DeltaSession

        return DeltaSession(table)

    def simulate(self, action: Action, state: TableState) -> TableState:
        if isinstance(action, SetPropertiesAction):
            return replace(state, properties={**state.properties, **action.properties})
        return state

    def state_at(self, table: TableLocation, version: int) -> TableState | None:
        from compactor.formats.delta.read.state import read_delta_state

        return read_delta_state(table, version=version)

    def inspect_settings(self, policy: TablePolicy) -> ComparedSettings:
        from compactor.models.inspect import FileSizeSettings

        return FileSizeSettings(policy.compaction.min_file_size)  # the log is compared with no setting

    def inspect(self, table: TableLocation, state: TableState, *,
                settings: ComparedSettings | None, horizon: int | None) -> InspectFindings:
        from compactor.formats.delta.inspection import inspect_delta

        return inspect_delta(table, state, policy_given=settings is not None, horizon=horizon)

    def log_growth(self, table: TableLocation, policy: TablePolicy) -> LogGrowth:
        from compactor.models.report import LogGrowth

        return LogGrowth()  # the report draws no Delta log

    def writer_settings(self, policy: TablePolicy) -> WriterSettings | None:
        return None  # a Delta writer needs no setting of compactor's


FORMAT: TableFormat = DeltaFormat()  # mypy checks the class against the interface
