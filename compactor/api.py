"""The library surface: what the CLI calls and what Airflow/Databricks jobs can call directly.

Every function returns a result object and never exits the process; deliberate failures raise
``CompactorError`` subclasses. Heavy modules (pyspark above all) are imported lazily, only when needed.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Mapping
from datetime import datetime
from pathlib import Path
from typing import TYPE_CHECKING, Any

from compactor.project.model import ProjectOptions
from compactor.tasks.plan_file import KEY_ENV

#: the environment variable holding the plan-signing key (`plan --sign`, `apply --require-signature`)
PLAN_KEY_ENV = KEY_ENV

if TYPE_CHECKING:  # pragma: no cover
    import threading

    from compactor.models.demo import DemoSwitch, TableSnapshot
    from compactor.models.inspect import InspectReport
    from compactor.models.report import TableReport
    from compactor.models.results import RunResults
    from compactor.models.writer import WriterSettings
    from compactor.planning.plan import Plan
    from compactor.project.compile import CompiledProject, ValidationResult
    from compactor.tasks.debug import Check
    from compactor.tasks.demo import DemoLake
    from compactor.tasks.repair import RepairReport as RepairReport  # re-exported: cli/ imports api, not tasks/


def validate(options: ProjectOptions = ProjectOptions()) -> ValidationResult:
    """Load, render and validate every policy. Never raises for invalid policies: the result
    carries every diagnostic (``result.ok`` is False)."""
    from compactor.project.compile import validate_project

    return validate_project(options)


def compile_project(options: ProjectOptions = ProjectOptions()) -> CompiledProject:
    """Like validate, but raises PolicyError when invalid; returns the project, target and the
    selected TablePolicy objects."""
    from compactor.project.compile import compile_project as _compile

    return _compile(options)


def plan(
    options: ProjectOptions = ProjectOptions(),
    *,
    now: datetime | None = None,
    out: Path | None = None,
    progress: Any = None,
    sign_key: bytes | None = None,
    compiled: CompiledProject | None = None,
) -> Plan:
    """Inspect the selected tables and build a plan (a pure function of policies, states and now).
    Writes it to ``out`` when given, signed with ``sign_key`` when given."""
    from compactor.tasks.plan import plan_project

    return plan_project(options, now=now, out=out, progress=progress, sign_key=sign_key, compiled=compiled)


def apply(
    options: ProjectOptions = ProjectOptions(),
    *,
    plan_file: Path | None = None,
    plan_obj: Plan | None = None,
    dry_run: bool = False,
    fail_fast: bool = False,
    replan_stale: bool = False,
    now: datetime | None = None,
    progress: Any = None,
    watch_s: float | None = None,
    max_runtime_s: float | None = None,
    require_key: bytes | None = None,
    compiled: CompiledProject | None = None,
    stop: threading.Event | None = None,
) -> RunResults:
    """Apply a saved plan (or a fresh plan when neither plan_file nor plan_obj is given).
    Writes run results under the project's target path. A saved plan is applied with the target it was
    made for (a contradicting ``options.target`` is refused) and only once. ``watch_s``: how long to keep
    watching each table's log after committing to it (default: the target's ``watch_window``, 0: no
    watch). ``max_runtime_s``: the run's time budget (default: the target's ``max_runtime``). ``stop``: set
    it to stop the run after the commit group under way (recorded as interrupted)."""
    from compactor.tasks.apply import apply_project

    return apply_project(
        options, plan_file=plan_file, plan_obj=plan_obj, dry_run=dry_run, fail_fast=fail_fast,
        replan_stale=replan_stale, now=now, progress=progress, watch_s=watch_s, max_runtime_s=max_runtime_s,
        require_key=require_key, compiled=compiled, stop=stop,
    )


def options_for_plan(options: ProjectOptions, plan: Plan, plan_file: Path | str) -> ProjectOptions:
    """``options`` with the target a saved plan was made for (a contradicting ``options.target`` is a
    UsageError naming the exact command): compile the project with them before applying the plan."""
    from compactor.tasks.saved_plan import options_for_plan as _options

    return _options(options, plan, plan_file)


def repair(
    options: ProjectOptions = ProjectOptions(),
    *,
    path: str | None = None,
    storage_options: Mapping[str, str] | None = None,
    dry_run: bool = False,
    horizon: int | None = None,
    approved: RepairReport | None = None,
) -> RepairReport:
    """Find and repair duplicate rewrites (another writer's compaction removed files a compaction had
    already removed, so rows are live twice): in one table at ``path``, or in every selected table of the
    project. Returns a RepairReport; a table that cannot be repaired is reported, never half-repaired.
    ``approved``: the RepairReport of a dry run the user reviewed; only its repairs are committed, each
    only when it is derived again identically."""
    from compactor.tasks.repair import repair_path, repair_project

    if path is not None:
        return repair_path(path, storage_options, dry_run=dry_run, horizon=horizon, approved=approved)
    return repair_project(options, dry_run=dry_run, horizon=horizon, approved=approved)


def inspect(path: str, *, storage_options: Mapping[str, str] | None = None, options: ProjectOptions | None = None,
            table: str | None = None, horizon: int | None = None) -> InspectReport:
    """Health report of the table (any format) at ``path``, or of the logs at a path that holds none.
    In a project (``options``, or ``table``): ``path`` may be a table's name, and ``table`` (or that name)
    compares the table against its policy, reporting what the planner would do ("-" as ``path``: the
    policy's path); an object-store path is read with the target's storage options unless
    ``storage_options`` are given. ``horizon``: how many of the newest commits to scan for duplicate
    rewrites (a format whose log can hold them)."""
    from compactor.tasks.inspect import inspect_in_project, inspect_path

    if options is None and table is None:
        return inspect_path(path, storage_options=storage_options, horizon=horizon)
    return inspect_in_project(options or ProjectOptions(), path, table=table, horizon=horizon,
                              storage_options=storage_options)


def report(options: ProjectOptions = ProjectOptions(), *, plan: Plan | None = None,
           compiled: CompiledProject | None = None) -> list[TableReport]:
    """What `compactor report` draws for each selected table (output/report/html.py renders the page):
    ``plan``: the plan to highlight (a saved one; default: plan now). The project is compiled once (or
    ``compiled`` is used) and each table's state is read once."""
    from compactor.tasks.report import collect_report

    return collect_report(options, plan=plan, compiled=compiled)


def writer_settings(options: ProjectOptions = ProjectOptions(), *,
                    compiled: CompiledProject | None = None) -> list[WriterSettings]:
    """`compactor compile`: per selected policy that asks something of its table's writer (a streaming
    writer's), the Spark settings and readStream/writeStream options the writer should use."""
    from compactor.tasks.writer import writer_settings as _settings

    return _settings(compiled or compile_project(options))


def target_storage_options(options: ProjectOptions = ProjectOptions()) -> Mapping[str, str]:
    """The storage options of the selected profile target (for commands that take a bare path: inspect).
    Without a compactor.yml in the project dir: none (the table libraries and the object store read the
    environment)."""
    from compactor.project.loader import target_storage_options as _storage_options

    return _storage_options(options)


def init(directory: Path) -> list[Path]:
    """Scaffold a new project; returns the files written."""
    from compactor.project.scaffold import init_project

    return init_project(directory)


def load_plan(path: Path, *, require_key: bytes | None = None) -> Plan:
    """A plan file, its digest checked (an edited plan is refused); signed with ``require_key`` if given."""
    from compactor.tasks.plan_file import load_plan as _load

    return _load(path, require_key=require_key)


def write_plan(plan: Plan, path: Path, *, sign_key: bytes | None = None) -> Path:
    from compactor.tasks.plan_file import write_plan as _write

    return _write(plan, path, sign_key=sign_key)


def history(options: ProjectOptions = ProjectOptions(), *, table: str | None = None,
            last: int | None = None) -> list[RunResults]:
    """Past apply runs of the project's target (newest last), optionally of one table only."""
    from compactor.project.loader import load_project
    from compactor.tasks.history import load_history

    project, _ = load_project(options.project_dir, options.vars)
    return load_history(project.target_dir, table=table, last=last)


def debug(options: ProjectOptions = ProjectOptions(), *, spark_session: bool = False) -> Iterator[Check]:
    """`compactor debug`: one check after another (project, profile, each table's store, Spark)."""
    from compactor.tasks.debug import run_checks

    return run_checks(options, spark_session=spark_session)


def demo(directory: Path, *, say: Callable[[str], None] = lambda s: None, **switches: bool) -> DemoLake:
    """Build the demo lake and its project in ``directory``: one demo table per format that offers one.
    ``switches``: ``with_<word>=False`` leaves out the table of a switch ``demo_switches()`` lists."""
    from compactor.tasks.demo import build_demo

    return build_demo(directory, say=say, **switches)


def demo_switches() -> list[DemoSwitch]:
    """What can leave a demo table out: `compactor demo --no-<word>`, ``demo(with_<word>=False)``."""
    from compactor.tasks.demo import demo_switches as _switches

    return _switches()


def demo_snapshots(demo: DemoLake) -> dict[str, TableSnapshot]:
    """Files, bytes and rows of each demo table its format shows a before/after of (the demo's)."""
    from compactor.tasks.demo import demo_snapshots as _snapshots

    return _snapshots(demo)
