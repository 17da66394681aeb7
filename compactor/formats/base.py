"""The TableFormat interface: everything that differs between table kinds (Delta tables, Spark file-sink
outputs) lives behind it, so tasks never ask which format a table is."""

from __future__ import annotations

import datetime as dt
from collections.abc import Callable, Collection, Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Protocol

from compactor.models.results import ActionOutcome as ActionOutcome  # re-exported: formats import it from here
from compactor.models.state import TableState
from compactor.models.table import TableLocation, table_ref
from compactor.planning.actions import Action
from compactor.planning.plan import TablePlan
from compactor.policy.model import TablePolicy

if TYPE_CHECKING:  # pragma: no cover - only annotations here: an apply never loads the inspect and report models
    from compactor.engines.base import RewriteEngine
    from compactor.engines.spark_needs import SparkNeeds
    from compactor.formats.demo import DemoTable
    from compactor.models.inspect import ComparedSettings, InspectFindings
    from compactor.models.report import LogGrowth
    from compactor.models.writer import WriterSettings
    from compactor.project.model import SparkSettings, Target


@dataclass(frozen=True)
class ActionContext:
    """What a format needs to run one action."""

    table: TablePlan
    #: the table state re-read just before this action (its precondition already checked)
    state: TableState
    target: Target
    #: the engine that rewrites files (created on first use: sink actions may need Spark under a local target)
    engine: Callable[[], RewriteEngine]
    #: custom commit metadata: {"compactor.version", "compactor.plan", "compactor.run_id", "compactor.action"}
    commit_metadata: Mapping[str, str] = field(default_factory=dict)
    dry_run: bool = False
    #: seconds to keep watching the log for a later commit that removes this action's inputs again
    watch_s: float = 0.0
    #: what the format keeps across the table's actions (its open table handle, work prepared ahead):
    #: ``TableFormat.open_session``; None for an action run on its own (the format opens what it needs)
    session: TableSession | None = None
    #: the table's next commit group, when it will run (preconditions hold on ``state``): a format may
    #: start preparing it (rewriting its bins) while this one commits
    next_group: tuple[Action, ...] = ()
    #: called with a bin's input bytes as each bin is written (progress)
    on_bin_done: Callable[[int], None] | None = None
    #: raises (LeaseError) unless this run still holds the table's lease: called right before every side
    #: effect on the table (each commit, manifest swap, vacuum), after every other check
    fence: Callable[[], None] | None = None

    @property
    def storage_options(self) -> Mapping[str, str]:
        return self.target.storage_options

    @property
    def location(self) -> TableLocation:
        """The table's reference: its path with the target's storage options, and its catalog identifier
        with that catalog's settings when a catalog located it (as the table run builds it)."""
        return table_ref(self.table.path, self.target.storage_options, self.table.identifier, self.target.catalogs)


class TableSession(Protocol):
    """What a format keeps across one table's actions during apply, typed by the format (Delta: its open
    DeltaTable, the path index of the state, a commit group prepared in the background). Created by
    ``TableFormat.open_session`` once per table run; ``close`` ends it (discarding work prepared for an
    action that did not run)."""

    def close(self) -> None: ...


class NoSession:
    """The session of a format that keeps nothing across actions."""

    def close(self) -> None:
        pass


class TableFormat(Protocol):
    #: the name policies and plans use ("delta", "spark_file_sink")
    name: str
    #: finding and repairing duplicate rewrites, for a format whose log can hold them (None: it cannot)
    duplicates: RepairsDuplicates | None
    #: the Python modules the format reads and commits through (their versions go into run results)
    libraries: tuple[str, ...]
    #: its table in `compactor demo`'s lake (formats/demo.py; None: it has none)
    demo: DemoTable | None

    def spark_needs(self, spark: SparkSettings, loads: bool) -> tuple[SparkNeeds, ...]:
        """What a Spark session needs for the format's tables under the profile's ``spark`` settings (its
        jars, static settings, how to tell a session has them: engines/spark_needs.py); () for nothing.
        ``loads``: the session is started here (resolve what it loads), else only checked (Spark Connect)."""

    def read_state(self, table: TableLocation, policy: TablePolicy | None = None, *,
                   session: TableSession | None = None) -> TableState:
        """A snapshot of the table. Raises TableReadError with a clear reason. ``session``: the table's
        session during apply (the format reads through the handle it keeps there)."""

    def open_session(self, table: TableLocation) -> TableSession:
        """The session of one table run (apply); the caller closes it when the table is done."""

    def plan_table(self, policy: TablePolicy, state: TableState, *, now: dt.datetime, engine: str) -> TablePlan:
        """PURE: the actions and skips for one table."""

    def unsupported(self, state: TableState, engine: str) -> str | None:
        """PURE: why ``engine`` cannot safely rewrite this table, or None."""

    def live_paths(self, state: TableState) -> Collection[str]:
        """The files an action's precondition requires to be still present."""

    def run(self, action: Action, ctx: ActionContext) -> ActionOutcome:
        """Perform one action (its precondition already checked on ``ctx.state``)."""

    def group_key(self, action: Action, state: TableState, engine: Callable[[], RewriteEngine],
                  table: TableLocation) -> Any:
        """Consecutive actions with the same key may share one commit (``run_group``); None: ``action``
        runs on its own. ``engine``: creates (or returns) the run's engine, when the key depends on it."""

    def run_group(self, actions: tuple[Action, ...], ctx: ActionContext) -> list[Any]:
        """Perform consecutive actions of one group key with one commit. Per action, its ActionOutcome or the
        CompactorError that kept it out of the commit (e.g. stale); raises when nothing was committed."""

    def recover(self, table: TableLocation, *, grace_s: float) -> list[str]:
        """Clean up after runs that were killed (call while holding the table lease); returns the files
        deleted. ``grace_s``: how old
        a file of unknown origin must be before it may be deleted (a concurrent appender's uncommitted file
        looks the same)."""

    def simulate(self, action: Action, state: TableState) -> TableState:
        """PURE: the state after ``action`` ran (dry runs evaluate later actions against it)."""

    def state_at(self, table: TableLocation, version: int) -> TableState | None:
        """The table as of an earlier ``version`` (the report's history); None for a format that keeps no
        earlier versions. Raises when that version cannot be read (e.g. vacuumed)."""

    def inspect_settings(self, policy: TablePolicy) -> ComparedSettings:
        """What `compactor inspect` compares a table of this format against under ``policy`` (at least
        its min_file_size; the format's own settings beside it)."""

    def inspect(self, table: TableLocation, state: TableState, *,
                settings: ComparedSettings | None, horizon: int | None) -> InspectFindings:
        """What `compactor inspect` reports beside the files of ``table`` (as the user named it;
        ``state``: read without a policy): its logs' health (data and text), rows live twice, warnings,
        recommendations. ``settings``: the managing policy's (None: no policy; they may be another
        format's); ``horizon``: how many of the newest commits to scan for duplicate rewrites (the
        format's default when None)."""

    def log_growth(self, table: TableLocation, policy: TablePolicy) -> LogGrowth:
        """The table's metadata logs file by file, for the report's charts (empty: nothing to draw)."""

    def writer_settings(self, policy: TablePolicy) -> WriterSettings | None:
        """What the table's writer should be configured with under ``policy`` (`compactor compile`); None
        when the policy asks nothing of its writer."""


class RepairOutcome(Protocol):
    """What a repair did (status clean / repaired / would_repair), its proposal and its JSON."""

    @property
    def status(self) -> str: ...

    @property
    def proposal(self) -> object | None: ...

    def to_dict(self) -> dict[str, Any]: ...

    def text(self, table: str) -> tuple[str, ...]:
        """How `compactor repair` words it for the table named ``table`` (a clean, would_repair or
        repaired outcome: the format's own words for what it found and does)."""


class RepairsDuplicates(Protocol):
    """A format whose log can hold duplicate rewrites (Delta): ``TableFormat.duplicates``. Tasks skip a
    format whose ``duplicates`` is None."""

    def repair_duplicates(self, table: TableLocation, *, horizon: int | None = None,
                          commit_metadata: Mapping[str, str] | None = None, dry_run: bool = False,
                          expected: object | None = None, fence: Callable[[], None] | None = None) -> RepairOutcome:
        """Repair every open duplicate rewrite (call while holding the table lease). ``expected``: the
        proposal of the dry run the user approved; what is derived now must be the same repair."""

    def removals_after(self, table: TableLocation, version: int) -> tuple[int, dict[str, list[int]]]:
        """(last version, {path: versions that removed it}) for the commits after ``version``."""
