"""`compactor apply`: run a plan, table by table.

Before anything is touched, the plan is checked against the project (planning/integrity.py): a plan
from another project, for other tables or paths, or with parameters its policies would not produce is
refused. Then, per table, under the table's lease (tasks/table_run.py): files left by killed runs are cleaned up, the table
is read once, and each action's precondition is checked on that snapshot (its format re-checks the
inputs against the log right before committing). The format runs the action (verifying rows before it
commits); results go to run_results.json and the run history.

``--dry-run`` writes nothing anywhere (no lease, no journal, no results): it checks preconditions and
evaluates each action against the state as earlier actions would have left it.
"""

from __future__ import annotations

import datetime as dt
import json
import logging
import os
import socket
import threading
import time
import uuid
from dataclasses import replace
from pathlib import Path
from typing import TYPE_CHECKING

from compactor import __version__
from compactor.engines.base import RewriteEngine
from compactor.errors import EngineUnavailableError, LeaseError, PlanError, UsageError
from compactor.formats import get_format
from compactor.formats.base import TableFormat
from compactor.models.events import (
    Progress,
    WatchWaiting,
)
from compactor.models.results import ActionResult, Interruption, RunResults, compute_run_totals
from compactor.models.table import table_ref
from compactor.planning.plan import Plan, TablePlan
from compactor.planning.vocabulary import rewrite_types
from compactor.project.model import Project, ProjectOptions, Target
from compactor.runtime.atomic_file import replace_with
from compactor.runtime.journal import DEFAULT_ORPHAN_GRACE_S
from compactor.runtime.lease import TableLease
from compactor.runtime.secrets import redact, register_secrets
from compactor.tasks.left_over import left_for_next_run
from compactor.tasks.table_run import Engines, TableRun, apply_table
from compactor.tasks.watch import TableWatch

if TYPE_CHECKING:  # pragma: no cover
    from compactor.project.compile import CompiledProject

log = logging.getLogger(__name__)



def _now_iso() -> str:
    return dt.datetime.now(dt.UTC).isoformat()


def apply_plan(plan: Plan, *, target: Target, project: Project | None = None, plan_file: str | None = None,
               dry_run: bool = False, fail_fast: bool = False, replan_stale: bool = False,
               progress: Progress | None = None, engine: RewriteEngine | None = None,
               orphan_grace_s: float = DEFAULT_ORPHAN_GRACE_S, watch_s: float = 0.0,
               stop: threading.Event | None = None) -> RunResults:
    """Run every action of ``plan`` on ``target``. ``engine``: a rewrite engine to use instead of the
    target's. ``orphan_grace_s``: how old a file of unknown origin left by an interrupted run must be
    before it is deleted (runtime/journal.py). ``stop``: set to stop the run early (the CLI's first Ctrl-C):
    the commit group under way finishes, nothing else starts, and the run is recorded as interrupted; a
    KeyboardInterrupt (a second Ctrl-C) records what the run committed until then before it propagates."""
    register_secrets(target.storage_options)
    run_id = dt.datetime.now(dt.UTC).strftime("%Y%m%dT%H%M%SZ") + "-" + uuid.uuid4().hex[:8]
    started = _now_iso()
    owner = f"compactor@{socket.gethostname()}:{os.getpid()}"
    results: list[ActionResult] = []
    engines = Engines(target, engine, [t.format for t in plan.tables])
    watching: list[tuple[TableWatch, TableLease]] = []  # tables whose lease is kept until the window closes
    deadline = time.monotonic() + target.max_runtime_s if target.max_runtime_s else None
    unavailable: EngineUnavailableError | None = None
    for table in plan.tables:
        if table.error:  # a table that could not be planned fails the run: a schedule never goes green
            results.append(ActionResult(table.name, "plan", {}, status="error", error=table.error))
    record = _Recorder(run_id, started, target, engines, plan, plan_file, dry_run, results,
                       project.target_dir if project is not None and not dry_run else None)
    try:
        for table in plan.tables:
            if not table.actions and not table.blockers:
                continue
            if stop is not None and stop.is_set():
                left_for_next_run(table.name, table.actions, results, progress)
                continue
            fmt = get_format(table.format)
            try:
                if dry_run:
                    failed = apply_table(TableRun(table, fmt, plan, target, engines, None, run_id, True,
                                                    replan_stale, progress, orphan_grace_s, watch_s,
                                                    deadline=deadline, stop=stop), results)
                else:
                    lease = TableLease(table.path, owner, run_id=run_id, storage_options=target.storage_options)
                    lease.acquire()
                    watch = _watch(table, fmt, target, run_id, watch_s, progress)
                    try:
                        failed = apply_table(TableRun(table, fmt, plan, target, engines, lease, run_id, False,
                                                        replan_stale, progress, orphan_grace_s, watch_s, watch,
                                                        deadline, stop),
                                              results)
                    finally:
                        if watch is not None and watch.active:
                            watching.append((watch, lease))
                        else:
                            if watch is not None:
                                watch.finish()
                            lease.release()
            except LeaseError as e:
                failed = True
                results += [ActionResult(table.name, a.type, dict(a.partition), "error", error=str(e))
                            for a in table.actions]
            except EngineUnavailableError as e:  # every action would fail alike: the run stops here, recorded
                unavailable = e
                done = {(r.table, r.type, tuple(sorted(r.partition.items()))) for r in results}
                results += [ActionResult(t.name, a.type, dict(a.partition), "error", error=e.message)
                            for t in plan.tables[plan.tables.index(table):] for a in t.actions
                            if (t.name, a.type, tuple(sorted(dict(a.partition).items()))) not in done]
                break
            if failed and fail_fast:
                break
        if watching:
            # the commits have landed: record the run before waiting, so that an interrupted watch
            # (Ctrl-C) never loses the record; it is written again, complete, after the watch
            record.write(_interruption(stop))
        _finish_watches(watching, progress, stop)
    except KeyboardInterrupt:
        # stopped at once: what is recorded committed; a group under way may have committed unrecorded
        record.write("at_once")
        raise
    finally:
        for watch, lease in watching:
            watch.stop()
            lease.release()
        engines.close()
    run = record.write(_interruption(stop))
    if unavailable is not None:  # after the record: the command says it in one line and exits non-zero
        raise unavailable
    return run


def _interruption(stop: threading.Event | None) -> Interruption | None:
    return "after_group" if stop is not None and stop.is_set() else None


class _Recorder:
    """The run's record as it stands (``results`` grows as actions finish), written to the project's
    run_results.json and history (``target_dir``; None: a dry run, or no project: not written)."""

    def __init__(self, run_id: str, started: str, target: Target, engines: Engines, plan: Plan,
                 plan_file: str | None, dry_run: bool, results: list[ActionResult], target_dir: Path | None) -> None:
        self.run_id, self.started, self.target, self.engines = run_id, started, target, engines
        self.plan, self.plan_file, self.dry_run, self.results, self.target_dir = plan, plan_file, dry_run, results, \
            target_dir

    def write(self, interrupted: Interruption | None) -> RunResults:
        for r in self.results:  # storage option values never reach run results or history
            if r.error:
                r.error = redact(r.error)
        run = RunResults(run_id=self.run_id, compactor_version=__version__, started_at=self.started,
                         finished_at=_now_iso(), engine=self.target.engine, engine_versions=self.engines.versions(),
                         target=self.target.redacted(), plan_generated_at=self.plan.generated_at,
                         plan_file=self.plan_file, dry_run=self.dry_run, plan_digest=self.plan.digest or None,
                         interrupted=interrupted, results=list(self.results),
                         totals=compute_run_totals(self.results, rewrite_types()))
        if self.target_dir is not None:
            write_run_results(run, self.target_dir)
        return run


def _watch(table: TablePlan, fmt: TableFormat, target: Target, run_id: str, watch_s: float,
           progress: Progress | None) -> TableWatch | None:
    if watch_s <= 0 or not TableWatch.supported(fmt):
        return None
    meta = {"compactor.version": __version__, "compactor.run_id": run_id,
            "compactor.action": f"{run_id}:{table.name}:watch"}
    return TableWatch(fmt, table.name, table_ref(table.path, target.storage_options, table.identifier, target.catalogs), watch_s, meta,
                      poll_s=min(1.0, max(0.05, watch_s / 20)), progress=progress)


def _finish_watches(watching: list[tuple[TableWatch, TableLease]], progress: Progress | None,
                    stop: threading.Event | None) -> None:
    """Wait for what is left of the tables' watch windows (their leases are still held), then release; a
    run asked to stop (``stop``) stops watching at once."""
    if not watching:
        return
    if progress:
        progress(WatchWaiting([w.table for w, _ in watching],
                              max(0.0, max(w.deadline for w, _ in watching) - time.monotonic())))
    while watching:
        watch, lease = watching[0]
        if stop is not None:
            stop.wait(max(0.0, watch.deadline - time.monotonic()))
            if stop.is_set():
                watch.stop()
        watch.finish()
        lease.release()
        watching.pop(0)


def write_run_results(run: RunResults, target_dir: Path) -> Path:
    from compactor.tasks.history import record_run

    target_dir.mkdir(parents=True, exist_ok=True)
    path = replace_with(target_dir / "run_results.json", json.dumps(run.to_dict(), indent=2, default=str))
    record_run(target_dir, run)
    return path


def apply_project(options: ProjectOptions, *, plan_file: Path | None = None, plan_obj: Plan | None = None,
                  dry_run: bool = False, fail_fast: bool = False, replan_stale: bool = False,
                  now: dt.datetime | None = None, progress: Progress | None = None,
                  watch_s: float | None = None, max_runtime_s: float | None = None,
                  require_key: bytes | None = None, compiled: CompiledProject | None = None,
                  stop: threading.Event | None = None) -> RunResults:
    """``watch_s``: the post-commit watch window (default: the target's ``watch_window``);
    ``max_runtime_s``: the run's time budget (default: the target's ``max_runtime``); ``require_key``:
    the plan file must be signed with this key; ``stop``: see ``apply_plan``. A saved plan (``plan_file``,
    or a ``plan_obj`` read from one) is applied with the target it was made for, and only once
    (tasks/saved_plan.py); ``compiled`` must then be the project compiled for that target."""

    from compactor.planning.integrity import plan_problems
    from compactor.project.compile import compile_project
    from compactor.tasks.history import load_history
    from compactor.tasks.plan import expand_policies, plan_project
    from compactor.tasks.plan_file import load_plan
    from compactor.tasks.saved_plan import (
        located_by_catalog,
        options_for_plan,
        pinned_policies,
        planned_target,
        refuse_if_applied,
    )

    if plan_obj is None and plan_file is not None:
        plan_obj = load_plan(plan_file, require_key=require_key)
    saved = plan_obj is not None and bool(plan_obj.digest)
    if plan_obj is not None and saved:
        options = options_for_plan(options, plan_obj, plan_file or "the plan")
    compiled = compiled or compile_project(options)
    if plan_obj is None:
        plan_obj = plan_project(options, now=now, compiled=compiled)
    planned = planned_target(plan_obj)
    if saved and planned is not None and planned != compiled.target.name:
        raise UsageError(f"the plan was made for target '{planned}', the project was compiled for target "
                         f"'{compiled.target.name}'", hint=f"compile it with --target {planned}")
    if plan_obj.target.get("engine") not in (None, compiled.target.engine):
        raise UsageError(f"the plan was made for the {plan_obj.target.get('engine')} engine but target "
                         f"'{compiled.target.name}' now uses {compiled.target.engine}",
                         hint="run `compactor plan` again for the target as it is now")
    if saved and not dry_run:
        refuse_if_applied(plan_obj, load_history(compiled.project.target_dir), options)
    # a saved plan pins where a catalog located its tables: no catalog lookup (no JVM for a Hive metastore)
    by_catalog = [p for p in compiled.policies if saved and located_by_catalog(p)]
    policies = expand_policies([p for p in compiled.policies if p not in by_catalog], compiled.project.root,
                               compiled.target.storage_options, {}, target=compiled.target)
    policies += pinned_policies(by_catalog, plan_obj)
    problems = plan_problems(plan_obj, compiled.project.name, policies, compiled.target.engine)
    if problems:
        shown = "\n  ".join(problems[:20]) + (f"\n  ... and {len(problems) - 20} more" if len(problems) > 20 else "")
        raise PlanError(f"the plan does not match this project's policies; nothing was applied:\n  {shown}",
                        hint="re-run `compactor plan` and review the new plan")
    target = compiled.target if max_runtime_s is None else replace(compiled.target, max_runtime_s=max_runtime_s)
    return apply_plan(plan_obj, target=target, project=compiled.project,
                      plan_file=str(plan_file) if plan_file else None, dry_run=dry_run, fail_fast=fail_fast,
                      replan_stale=replan_stale, progress=progress,
                      watch_s=compiled.target.watch_window_s if watch_s is None else watch_s, stop=stop)
