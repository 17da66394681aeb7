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
from compactor.models.results import ActionResult, RunResults, compute_run_totals
from compactor.models.table import TableLocation
from compactor.planning.plan import Plan, TablePlan
from compactor.project.model import Project, ProjectOptions, Target
from compactor.runtime.atomic_file import replace_with
from compactor.runtime.journal import DEFAULT_ORPHAN_GRACE_S
from compactor.runtime.lease import TableLease
from compactor.runtime.secrets import redact, register_secrets
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
               orphan_grace_s: float = DEFAULT_ORPHAN_GRACE_S, watch_s: float = 0.0) -> RunResults:
    """Run every action of ``plan`` on ``target``. ``engine``: a rewrite engine to use instead of the
    target's. ``orphan_grace_s``: how old a file of unknown origin left by an interrupted run must be
    before it is deleted (runtime/journal.py)."""
    register_secrets(target.storage_options)
    run_id = dt.datetime.now(dt.UTC).strftime("%Y%m%dT%H%M%SZ") + "-" + uuid.uuid4().hex[:8]
    started = _now_iso()
    owner = f"compactor@{socket.gethostname()}:{os.getpid()}"
    results: list[ActionResult] = []
    engines = Engines(target, engine)
    watching: list[tuple[TableWatch, TableLease]] = []  # tables whose lease is kept until the window closes
    deadline = time.monotonic() + target.max_runtime_s if target.max_runtime_s else None
    unavailable: EngineUnavailableError | None = None
    for table in plan.tables:
        if table.error:  # a table that could not be planned fails the run: a schedule never goes green
            results.append(ActionResult(table.name, "plan", {}, status="error", error=table.error))
    try:
        for table in plan.tables:
            if not table.actions and not table.duplicate_rewrite:
                continue
            fmt = get_format(table.format)
            try:
                if dry_run:
                    failed = apply_table(TableRun(table, fmt, plan, target, engines, None, run_id, True,
                                                    replan_stale, progress, orphan_grace_s, watch_s,
                                                    deadline=deadline), results)
                else:
                    lease = TableLease(table.path, owner, run_id=run_id, storage_options=target.storage_options)
                    lease.acquire()
                    watch = _watch(table, fmt, target, run_id, watch_s, progress)
                    try:
                        failed = apply_table(TableRun(table, fmt, plan, target, engines, lease, run_id, False,
                                                        replan_stale, progress, orphan_grace_s, watch_s, watch,
                                                        deadline),
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
        if watching and project is not None and not dry_run:
            # the commits have landed: record the run before waiting, so that an interrupted watch
            # (Ctrl-C) never loses the record; it is written again, complete, after the watch
            write_run_results(_run_results(run_id, started, target, engines, plan, plan_file, dry_run, results),
                              project.target_dir)
        _finish_watches(watching, progress)
    finally:
        for watch, lease in watching:
            watch.stop()
            lease.release()
        engines.close()
    run = _run_results(run_id, started, target, engines, plan, plan_file, dry_run, results)
    if project is not None and not dry_run:
        write_run_results(run, project.target_dir)
    if unavailable is not None:  # after the record: the command says it in one line and exits non-zero
        raise unavailable
    return run


def _run_results(run_id: str, started: str, target: Target, engines: Engines, plan: Plan, plan_file: str | None,
                 dry_run: bool, results: list[ActionResult]) -> RunResults:
    for r in results:  # storage option values never reach run results or history
        if r.error:
            r.error = redact(r.error)
    return RunResults(run_id=run_id, compactor_version=__version__, started_at=started, finished_at=_now_iso(),
                      engine=target.engine, engine_versions=engines.versions(), target=target.redacted(),
                      plan_generated_at=plan.generated_at, plan_file=plan_file, dry_run=dry_run,
                      results=list(results), totals=compute_run_totals(results))


def _watch(table: TablePlan, fmt: TableFormat, target: Target, run_id: str, watch_s: float,
           progress: Progress | None) -> TableWatch | None:
    if watch_s <= 0 or not TableWatch.supported(fmt):
        return None
    meta = {"compactor.version": __version__, "compactor.run_id": run_id,
            "compactor.action": f"{run_id}:{table.name}:watch"}
    return TableWatch(fmt, table.name, TableLocation(table.path, target.storage_options), watch_s, meta,
                      poll_s=min(1.0, max(0.05, watch_s / 20)), progress=progress)


def _finish_watches(watching: list[tuple[TableWatch, TableLease]], progress: Progress | None) -> None:
    """Wait for what is left of the tables' watch windows (their leases are still held), then release."""
    if not watching:
        return
    if progress:
        progress(WatchWaiting([w.table for w, _ in watching],
                              max(0.0, max(w.deadline for w, _ in watching) - time.monotonic())))
    while watching:
        watch, lease = watching[0]
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
                  require_key: bytes | None = None, compiled: CompiledProject | None = None) -> RunResults:
    """``watch_s``: the post-commit watch window (default: the target's ``watch_window``);
    ``max_runtime_s``: the run's time budget (default: the target's ``max_runtime``); ``require_key``:
    the plan file must be signed with this key."""

    from compactor.planning.integrity import plan_problems
    from compactor.project.compile import compile_project
    from compactor.tasks.plan import expand_policies, plan_project
    from compactor.tasks.plan_file import load_plan

    compiled = compiled or compile_project(options)
    if plan_obj is None:
        plan_obj = load_plan(plan_file, require_key=require_key) if plan_file is not None \
            else plan_project(options, now=now, compiled=compiled)
    if plan_obj.target.get("engine") not in (None, compiled.target.engine):
        raise UsageError(f"the plan was made for the {plan_obj.target.get('engine')} engine but target "
                         f"'{compiled.target.name}' uses {compiled.target.engine}",
                         hint="pass the same --target as for `compactor plan`")
    policies = expand_policies(compiled.policies, compiled.project.root, compiled.target.storage_options, {},
                               target=compiled.target)
    problems = plan_problems(plan_obj, compiled.project.name, policies, compiled.target.engine)
    if problems:
        shown = "\n  ".join(problems[:20]) + (f"\n  ... and {len(problems) - 20} more" if len(problems) > 20 else "")
        raise PlanError(f"the plan does not match this project's policies; nothing was applied:\n  {shown}",
                        hint="re-run `compactor plan` and review the new plan")
    target = compiled.target if max_runtime_s is None else replace(compiled.target, max_runtime_s=max_runtime_s)
    return apply_plan(plan_obj, target=target, project=compiled.project,
                      plan_file=str(plan_file) if plan_file else None, dry_run=dry_run, fail_fast=fail_fast,
                      replan_stale=replan_stale, progress=progress,
                      watch_s=compiled.target.watch_window_s if watch_s is None else watch_s)
