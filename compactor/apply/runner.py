"""Apply a plan: per table, under a lease, re-check each action's precondition, run it on the engine,
verify rows, and record results. Stale actions are skipped (or re-planned with replan_stale)."""

from __future__ import annotations

import datetime as dt
import json
import logging
import os
import socket
import time
import uuid
from dataclasses import dataclass, replace
from pathlib import Path
from typing import TYPE_CHECKING, Any, Callable

from compactor import __version__
from compactor.apply.journal import DEFAULT_ORPHAN_GRACE_S, ActionJournal, folders_of, recover_orphans
from compactor.apply.results import ActionResult, RunResults, compute_run_totals
from compactor.engines.base import ActionContext, ActionOutcome, Engine
from compactor.engines.lease import TableLease
from compactor.errors import (ApplyError, CompactorError, LeaseError, StalePlanError, UsageError,
                              VerificationError)
from compactor.planning.plan import REWRITE_ACTIONS, Action, Plan, TablePlan
from compactor.project.model import Project, Target
from compactor.state.model import TableState

if TYPE_CHECKING:  # pragma: no cover
    from compactor.api import ProjectOptions

log = logging.getLogger(__name__)

Progress = Callable[[str, dict[str, Any]], None]


def _now_iso() -> str:
    return dt.datetime.now(dt.timezone.utc).isoformat()


def _read_state(table: TablePlan, target: Target) -> TableState:
    if table.format == "spark_file_sink":
        from compactor.sink.state import read_sink_state

        return read_sink_state(table.path, target.storage_options)
    from compactor.state.delta import read_delta_state

    return read_delta_state(table.path, target.storage_options)


def _replan(action: Action, state: TableState) -> Action | None:
    """Re-plan one stale partition with the parameters it was planned with."""
    from compactor.planning.partitions import plan_partitions
    from compactor.policy.model import Compaction, Triggers

    p = action.params
    comp = Compaction(strategy=p.get("strategy", "bin_pack"), z_order_by=tuple(p.get("z_order_by") or ()),
                      sort_by=tuple(p.get("sort_by") or ()), target_file_size=int(p["target_file_size"]),
                      min_file_size=int(p["min_file_size"]), triggers=Triggers(min_input_files=2))
    import pyarrow.compute as pc

    mask = None
    for col, val in action.partition.items():
        column = state.files.column(f"partition.{col}")
        m = pc.is_null(column) if val is None else pc.equal(column, val)
        mask = m if mask is None else pc.and_(mask, m)
    files = state.files.filter(mask) if mask is not None else state.files
    actions, _ = plan_partitions(files, state.partition_columns, comp, now=dt.datetime.now(dt.timezone.utc),
                                 bin_model=p.get("bin_model", "delta-rs"), version=state.version,
                                 action_type=action.type if action.type != "z_order" else "compact")
    return actions[0] if actions else None


def _rows_of(state: TableState, paths: tuple[str, ...]) -> int | None:
    f = state.files
    rec = dict(zip(f.column("path").to_pylist(), f.column("num_records").to_pylist()))
    vals = [rec.get(p) for p in paths]
    return None if any(v is None for v in vals) else sum(vals)


class _SparkEngineFactory:
    """Creates the spark engine on first use (sink actions need one even under the local target)."""

    def __init__(self, target: Target, engine: Engine | None) -> None:
        self.target, self.engine, self.created = target, engine, False

    def __call__(self) -> Engine:
        if self.engine is None or getattr(self.engine, "name", "") != "spark":
            from compactor.engines.registry import create_engine

            self.engine = create_engine(replace(self.target, engine="spark"))
            self.created = True
        return self.engine

    def close(self) -> None:
        if self.created and self.engine is not None:
            self.engine.close()


def apply_plan(plan: Plan, *, target: Target, project: Project | None = None, plan_file: str | None = None,
               dry_run: bool = False, fail_fast: bool = False, replan_stale: bool = False,
               progress: Progress | None = None, engine: Engine | None = None,
               orphan_grace_s: float = DEFAULT_ORPHAN_GRACE_S) -> RunResults:
    """Run every action of ``plan`` on ``target`` (no project needed). ``orphan_grace_s``: how old a file
    left by an interrupted run must be before it is deleted (see compactor.apply.journal)."""
    run_id = dt.datetime.now(dt.timezone.utc).strftime("%Y%m%dT%H%M%SZ") + "-" + uuid.uuid4().hex[:8]
    started = _now_iso()
    owner = f"compactor@{socket.gethostname()}:{os.getpid()}"
    results: list[ActionResult] = []
    engine_obj: Engine | None = engine
    stop_all = False
    spark_factory = _SparkEngineFactory(target, engine)
    try:
        for table in plan.tables:
            if stop_all:
                break
            if not table.actions:
                continue
            if engine_obj is None and table.format != "spark_file_sink":
                from compactor.engines.registry import create_engine

                engine_obj = create_engine(target)
            try:
                with TableLease(table.path, owner, run_id=run_id) as lease:
                    env = _TableRun(table, plan, target, engine_obj, lease, run_id, dry_run, replan_stale,
                                    progress, spark_factory, orphan_grace_s)
                    failed = _apply_table(env, results)
            except LeaseError as e:
                failed = True
                for a in table.actions:
                    results.append(ActionResult(table.name, a.type, dict(a.partition), "error", error=str(e)))
            if failed and fail_fast:
                stop_all = True
    finally:
        spark_factory.close()
        if engine_obj is not None and engine is None:
            engine_obj.close()
    versions = engine_obj.versions() if engine_obj is not None else {}
    run = RunResults(run_id=run_id, compactor_version=__version__, started_at=started, finished_at=_now_iso(),
                     engine=target.engine, engine_versions=versions, target=target.redacted(),
                     plan_generated_at=plan.generated_at, plan_file=plan_file, dry_run=dry_run, results=results,
                     totals=compute_run_totals(results))
    if project is not None:
        write_run_results(run, project.target_dir)
    return run


@dataclass(frozen=True)
class _TableRun:
    table: TablePlan
    plan: Plan
    target: Target
    engine: Engine | None
    lease: TableLease
    run_id: str
    dry_run: bool
    replan_stale: bool
    progress: Progress | None
    spark_factory: Callable[[], Engine]
    orphan_grace_s: float


def _recover(env: _TableRun) -> None:
    if env.table.format == "spark_file_sink" or env.dry_run:
        return
    try:
        recover_orphans(env.table.path, grace_s=env.orphan_grace_s)
    except Exception as e:  # noqa: BLE001 - cleanup is best effort; it never blocks compaction
        log.warning("%s: could not check for files left by interrupted runs: %s", env.table.name, e)


def _apply_table(env: _TableRun, results: list[ActionResult]) -> bool:
    """Returns True when the table failed (error or verification failure)."""
    table, progress = env.table, env.progress
    _recover(env)
    # An engine that re-checks every input on the snapshot it commits from (the local engine) lets the
    # runner read the table once: a stale verdict on that older snapshot is re-decided on a fresh one.
    reuse_state = table.format == "delta" and getattr(env.engine, "rechecks_inputs", False)
    cached: TableState | None = None
    for i, planned in enumerate(table.actions):
        t0 = time.monotonic()
        res = ActionResult(table.name, planned.type, dict(planned.partition))
        try:
            state = cached or _read_state(table, env.target)
            try:
                _run_action(env, i, planned, res, state)
            except StalePlanError:
                if cached is None:
                    raise
                res = ActionResult(table.name, planned.type, dict(planned.partition))
                state = _read_state(table, env.target)
                _run_action(env, i, planned, res, state)
            if reuse_state:
                cached = state
        except StalePlanError as e:
            res.status, res.error = "stale", e.message
        except VerificationError as e:
            res.status, res.error = "verification_failed", e.message
            res.duration_s = round(time.monotonic() - t0, 3)
            results.append(res)
            log.error("%s: verification failed, stopping this table: %s", table.name, e.message)
            return True
        except CompactorError as e:
            res.status, res.error = "error", str(e)
        except Exception as e:  # noqa: BLE001 - one failing action must not hide the others' results
            log.exception("action failed")
            res.status, res.error = "error", f"{type(e).__name__}: {e}"
        res.duration_s = round(time.monotonic() - t0, 3)
        results.append(res)
        if progress:
            progress("action_end", {"table": table.name, "result": res})
        if res.status == "error":
            return True
    return False


def _run_action(env: _TableRun, i: int, planned: Action, res: ActionResult, state: TableState) -> None:
    """Check the precondition on ``state``, run the action, verify rows; fills ``res``."""
    table, engine, run_id = env.table, env.engine, env.run_id
    action = planned
    res.table_version_before = state.version
    if action.input_paths:
        live = set(state.files.column("path").to_pylist())
        gone = [p for p in action.input_paths if p not in live]
        if gone:
            if not env.replan_stale:
                raise StalePlanError(f"{len(gone)} planned input file(s) are no longer live (e.g. {gone[0]})")
            new = _replan(action, state)
            if new is None:
                raise StalePlanError("partition changed since planning and no longer needs compaction")
            action = new
            res.details = {"replanned": True}
    res.rows_before = _rows_of(state, action.input_paths) if action.type in REWRITE_ACTIONS else None
    if env.progress:
        env.progress("action_start", {"table": table.name, "action": action.type, "partition": action.partition,
                                      "bytes": action.input_bytes, "index": i, "count": len(table.actions)})
    if env.dry_run and action.type != "vacuum":
        res.status = "skipped"
        res.details = {**res.details, "dry_run": True, "would_rewrite_files": action.input_files}
        return
    ctx = ActionContext(table=table, state=state, storage_options=env.target.storage_options,
                        commit_metadata={"compactor.version": __version__, "compactor.run_id": run_id,
                                         "compactor.plan": env.plan.generated_at,
                                         "compactor.action": f"{run_id}:{table.name}:{i}"},
                        dry_run=env.dry_run)
    env.lease.check()
    if action.type in REWRITE_ACTIONS and table.format != "spark_file_sink":
        journal = ActionJournal(table.path, run_id, ctx.commit_metadata["compactor.action"], state.version,
                                folders_of(action.input_paths))
        try:
            with journal:
                outcome = _run(engine, action, ctx, table, env.spark_factory)
        except Exception:
            _recover(env)
            raise
    else:
        outcome = _run(engine, action, ctx, table, env.spark_factory)
    _fill(res, outcome)
    if action.type in REWRITE_ACTIONS and not outcome.details.get("repaired"):
        _verify(outcome)
    if env.dry_run:
        res.status = "skipped"


def _run(engine: Engine | None, action: Action, ctx: ActionContext, table: TablePlan,
         spark_factory: Callable[[], Engine]) -> ActionOutcome:
    if table.format == "spark_file_sink" or action.type.startswith("sink_"):
        try:
            from compactor.sink.apply import run_sink_action
        except ImportError:
            raise ApplyError("sink support not available (compactor.sink.apply is missing from this build)") from None
        return run_sink_action(action, ctx, spark_factory)
    assert engine is not None
    return engine.run(action, ctx)


def _fill(res: ActionResult, o: ActionOutcome) -> None:
    res.files_removed, res.files_added = o.files_removed, o.files_added
    res.bytes_removed, res.bytes_added = o.bytes_removed, o.bytes_added
    if o.rows_removed is not None:
        res.rows_before = o.rows_removed
    res.rows_after = o.rows_added
    if o.version_before is not None:
        res.table_version_before = o.version_before
    res.table_version_after = o.version_after
    res.details = {**res.details, **o.details}


def _verify(o: ActionOutcome) -> None:
    if o.files_removed == 0 and o.files_added == 0:
        return
    if o.rows_removed is None or o.rows_added is None:
        raise VerificationError("row counts are missing from the log; cannot verify the rewrite")
    if o.rows_removed != o.rows_added:
        raise VerificationError(f"rows removed ({o.rows_removed}) != rows added ({o.rows_added}) in version {o.version_after}")


def write_run_results(run: RunResults, target_dir: Path) -> Path:
    target_dir.mkdir(parents=True, exist_ok=True)
    path = target_dir / "run_results.json"
    tmp = path.with_name(".run_results.json.tmp")
    tmp.write_text(json.dumps(run.to_dict(), indent=2, default=str))
    os.replace(tmp, path)
    try:
        from compactor.history import record_run
    except ImportError:
        return path
    record_run(target_dir, run)
    return path


def apply_project(options: "ProjectOptions", *, plan_file: Path | None = None, plan_obj: Plan | None = None,
                  dry_run: bool = False, fail_fast: bool = False, replan_stale: bool = False,
                  now: dt.datetime | None = None, progress: Progress | None = None) -> RunResults:
    from compactor.planning.build import plan_project
    from compactor.planning.io import load_plan
    from compactor.policy.compile import compile_project

    compiled = compile_project(options)
    if plan_obj is None:
        plan_obj = load_plan(plan_file) if plan_file is not None else plan_project(options, now=now)
    if plan_obj.target.get("engine") not in (None, compiled.target.engine):
        raise UsageError(f"the plan was made for the {plan_obj.target.get('engine')} engine but target "
                         f"'{compiled.target.name}' uses {compiled.target.engine}",
                         hint="pass the same --target as for `compactor plan`")
    return apply_plan(plan_obj, target=compiled.target, project=compiled.project,
                      plan_file=str(plan_file) if plan_file else None, dry_run=dry_run, fail_fast=fail_fast,
                      replan_stale=replan_stale, progress=progress)
