"""One table of a plan, under its lease: clean up after killed runs, refuse the table while a blocker no
planned action answers is left (rows live twice no reviewed repair answers), then the table's actions in
plan order. Consecutive rewrites the format can group share one commit (partial progress per group); each
action's precondition is checked on the snapshot read once for the table (its format re-checks the inputs
against the log right before committing)."""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from compactor import __version__
from compactor.engines.base import RewriteEngine
from compactor.errors import CompactorError, EngineUnavailableError, StalePlanError, VerificationError
from compactor.formats.base import ActionContext, TableFormat, TableSession
from compactor.models.events import (
    ActionFinished,
    ActionStarted,
    BinsDone,
    GroupStarted,
    Progress,
)
from compactor.models.results import ActionResult
from compactor.models.state import TableState
from compactor.models.table import TableLocation, table_ref
from compactor.planning.actions import Action, RewriteAction
from compactor.planning.blockers import by_kind
from compactor.planning.plan import Plan, TablePlan
from compactor.planning.vocabulary import blocker_kind
from compactor.project.model import Target
from compactor.runtime.lease import TableLease
from compactor.tasks.left_over import left_for_next_run, out_of_time
from compactor.tasks.replan import replan
from compactor.tasks.watch import TableWatch

log = logging.getLogger(__name__)


class Engines:
    """The rewrite engine of the target, created on first use and shared by every table of the run.
    ``formats``: the formats of the run's tables (what a Spark session needs for them: tasks/spark_needs.py)."""

    def __init__(self, target: Target, engine: RewriteEngine | None, formats: Sequence[str] = ()) -> None:
        self.target, self.engine, self.created, self.formats = target, engine, False, tuple(formats)

    def __call__(self) -> RewriteEngine:
        if self.engine is None:
            from compactor.engines.registry import create_engine
            from compactor.tasks.spark_needs import needs_of

            self.engine = create_engine(self.target, needs_of(self.formats, self.target.spark))
            self.created = True
        return self.engine

    def versions(self) -> dict[str, str]:
        """The engine's libraries and the run's formats' (none when no engine ran)."""
        from compactor.tasks.spark_needs import library_versions

        return {**self.engine.versions(), **library_versions(self.formats)} if self.engine is not None else {}

    def close(self) -> None:
        if self.created and self.engine is not None:
            self.engine.close()


@dataclass(frozen=True)
class TableRun:
    """What applying one table of a plan needs: its plan and format, the target, engines, lease and settings."""

    table: TablePlan
    fmt: TableFormat
    plan: Plan
    target: Target
    engines: Engines
    lease: TableLease | None
    run_id: str
    dry_run: bool
    replan_stale: bool
    progress: Progress | None
    orphan_grace_s: float
    watch_s: float
    #: the post-commit watch of this table (None: no window, a dry run, or a format without one)
    watch: TableWatch | None = None
    #: time.monotonic() after which no new commit group starts (the target's max_runtime)
    deadline: float | None = None
    #: set when the run is asked to stop (Ctrl-C): no new commit group starts; the one under way finishes
    stop: threading.Event | None = None
    #: where the table lives, with the target's storage options (built once per table run)
    location: TableLocation = field(init=False)

    def __post_init__(self) -> None:
        object.__setattr__(self, "location", table_ref(self.table.path, self.target.storage_options,
                                                       self.table.identifier, self.target.catalogs))


def apply_table(env: TableRun, results: list[ActionResult]) -> bool:
    """Returns True when the table failed (error or verification failure)."""
    table, fmt = env.table, env.fmt
    if not env.dry_run:
        try:
            fmt.recover(env.location, grace_s=env.orphan_grace_s)
        except Exception as e:  # noqa: BLE001 - cleanup is best effort; it never blocks compaction
            log.warning("%s: could not check for files left by interrupted runs: %s", table.name, e)
    if _refused(table, results, env.progress):
        return True  # a blocker no planned action answers: leave the table as it is
    session = fmt.open_session(env.location)
    try:
        return _run_actions(env, results, session)
    finally:
        session.close()  # discards work prepared for an action that did not run


def _refused(table: TablePlan, results: list[ActionResult], progress: Progress | None) -> bool:
    """The plan found blockers in this table that no planned action answers (e.g. rows live twice that
    compactor could not prove a repair for): the table fails (apply exits 1) and nothing of it is touched,
    one error per kind of blocker, in the format's words. What answers a blocker is never improvised here:
    it runs only as a reviewed action of the plan (README, Safety model)."""
    left = table.unanswered
    for code, blockers in by_kind(left).items():
        kind = blocker_kind(code)
        res = ActionResult(table.name, kind.action, {}, status="error", error=kind.refusal(blockers))
        results.append(res)
        if progress:
            progress(ActionFinished(table.name, res))
    return bool(left)


def _run_actions(env: TableRun, results: list[ActionResult], session: TableSession) -> bool:
    """The table's actions in plan order; consecutive rewrites the format can group share one commit (at
    most commit_every_bins bins and commit_every_bytes bytes: partial progress per group)."""
    actions = env.table.actions
    state: TableState | None = None
    bins = _BinProgress(env, actions)
    if env.table.table_id is not None:
        same, state = _same_table(env, session, results)
        if not same:
            return True
    i = 0
    while i < len(actions):
        if env.deadline is not None and time.monotonic() >= env.deadline:
            out_of_time(env.table.name, actions[i:], results, env.target.max_runtime_s or 0, env.progress)
            return False
        if env.stop is not None and env.stop.is_set():
            left_for_next_run(env.table.name, actions[i:], results, env.progress)
            return False
        t0 = time.monotonic()
        if state is None:
            try:
                state = env.fmt.read_state(env.location, session=session)
            except Exception:  # noqa: BLE001 - the action's own run reads again and reports why
                state = None
        try:
            group = _group(env, i, state) if state is not None else None
        except EngineUnavailableError:
            raise
        except Exception:  # noqa: BLE001 - the action's own run reports it
            group = None
        if group is None:
            state, failed = _run_single(env, i, state, session, results, t0)
            i += 1
        else:
            assert state is not None
            failed = _run_group(env, group, state, session, results, bins, t0)
            i = group[-1] + 1
        if failed:
            return True
    return False


def _same_table(env: TableRun, session: TableSession,
                results: list[ActionResult]) -> tuple[bool, TableState | None]:
    """Whether the table at the planned path is the one planned (its log states the same table id; a path a
    catalog gave, pinned in the plan, may since name another table, dropped and created again), and the
    state read to tell. Not the same: every action fails, nothing touched."""
    try:
        state = env.fmt.read_state(env.location, session=session)
    except Exception:  # noqa: BLE001 - unreadable: each action's own read reports why
        return True, None
    found = state.table_id
    if found in (None, env.table.table_id):
        return True, state
    why = (f"the table at {env.table.path} is not the table planned (table id {found}, planned "
           f"{env.table.table_id}): it was dropped and created again, or its catalog names another location; "
           "nothing was touched (run `compactor plan`)")
    for a in env.table.actions:
        res = ActionResult(env.table.name, a.type, dict(a.partition), "error", error=why)
        results.append(res)
        if env.progress:
            env.progress(ActionFinished(env.table.name, res))
    return False, None


def _group(env: TableRun, i: int, state: TableState) -> list[int] | None:
    """Indices of the commit group starting at action ``i``: it and the rewrites after it with the same
    group key that fit the group's bins and bytes; None when action ``i`` runs on its own."""
    actions, fmt = env.table.actions, env.fmt
    first = actions[i]
    if env.dry_run or not isinstance(first, RewriteAction):
        return None
    key = fmt.group_key(first, state, env.engines, env.location)
    if key is None:
        return None
    live = fmt.live_paths(state)
    try:
        first.check(live)
    except CompactorError:
        return None  # stale: runs on its own (reported, or re-planned)
    group, bins, size = [i], len(first.bins), first.input_bytes
    for j in range(i + 1, len(actions)):
        a = actions[j]
        if not isinstance(a, RewriteAction) or bins + len(a.bins) > env.target.commit_every_bins \
                or size + a.input_bytes > env.target.commit_every_bytes \
                or fmt.group_key(a, state, env.engines, env.location) != key:
            break
        try:
            a.check(live)
        except CompactorError:
            break
        group.append(j)
        bins, size = bins + len(a.bins), size + a.input_bytes
    return group


def _run_single(env: TableRun, i: int, state: TableState | None, session: TableSession,
                results: list[ActionResult], t0: float) -> tuple[TableState | None, bool]:
    """Run action ``i`` on its own (reading the table first if needed). Returns the state after it and
    whether the table must stop."""
    planned = env.table.actions[i]
    res = ActionResult(env.table.name, planned.type, dict(planned.partition))
    try:
        if state is None:
            state = env.fmt.read_state(env.location, session=session)
        _run_action(env, i, planned, res, state, session)
        state = env.fmt.simulate(planned, state)
    except EngineUnavailableError:
        raise  # every action would fail the same way: the run stops with one message
    except Exception as e:  # noqa: BLE001 - one failing action must not hide the others' results
        _failed(res, e)
    return state, _record(env, res, results, t0)


def _run_group(env: TableRun, group: list[int], state: TableState, session: TableSession,
               results: list[ActionResult], bins: _BinProgress, t0: float) -> bool:
    """Run a commit group (preconditions checked by _group) with one fmt.run_group; returns True when
    the table must stop."""
    table, fmt = env.table, env.fmt
    members = [(i, table.actions[i], ActionResult(table.name, table.actions[i].type, dict(table.actions[i].partition)))
               for i in group]
    for _, action, res in members:
        res.table_version_before = state.version
        res.rows_before = action.rows
        res.details.commit_group = len(members)
    if env.progress:
        env.progress(GroupStarted(table.name, group[0], group[-1], len(table.actions),
                                  sum(len(a.bins) for _, a, _ in members), sum(a.input_bytes for _, a, _ in members)))
    ctx = _context(env, f"{group[0]}" if len(group) == 1 else f"{group[0]}-{group[-1]}", state, session,
                   next_group=_next_group(env, group[-1] + 1, state), on_bin_done=bins.done)
    try:
        if env.lease is not None:
            env.lease.check()
        if env.watch is not None:
            with env.watch.lock:  # the watch's repairs never interleave with this table's own commits
                outcomes = fmt.run_group(tuple(a for _, a, _ in members), ctx)
        else:
            outcomes = fmt.run_group(tuple(a for _, a, _ in members), ctx)
    except EngineUnavailableError:
        raise  # nothing of the group was committed; the run stops with one message
    except Exception as e:  # noqa: BLE001 - nothing of the group was committed
        for _, _, res in members:
            _failed(res, e)
    else:
        for (_, _, res), outcome in zip(members, outcomes):
            if isinstance(outcome, Exception):
                _failed(res, outcome)
                continue
            res.record(outcome)
            res.status = "success"
            if env.watch is not None and outcome.removed_paths and outcome.version_after is not None \
                    and outcome.details.repaired is None:
                env.watch.add(int(outcome.version_before or 0), outcome.version_after, outcome.removed_paths, res)
    stop = False
    share = (time.monotonic() - t0) / len(members)  # each member's share of the group's time: they add up
    for _, _, res in members:
        stop = _record(env, res, results, t0, share) or stop
    return stop


def _next_group(env: TableRun, j: int, state: TableState) -> tuple[Action, ...]:
    """The commit group after this one, when it will run as planned (the format may rewrite its bins
    while this group commits)."""
    if j >= len(env.table.actions) or (env.deadline is not None and time.monotonic() >= env.deadline):
        return ()
    try:
        group = _group(env, j, state)
    except EngineUnavailableError:
        raise
    except Exception:  # noqa: BLE001 - nothing is prepared; the group's own run reports the problem
        return ()
    return tuple(env.table.actions[i] for i in group) if group else ()


def _failed(res: ActionResult, e: BaseException) -> None:
    if isinstance(e, StalePlanError):
        res.status, res.error = "stale", e.message
    elif isinstance(e, VerificationError):
        res.status, res.error = "verification_failed", e.message
    elif isinstance(e, CompactorError):
        res.status, res.error = "error", str(e)
    else:
        log.error("action failed", exc_info=e)
        res.status, res.error = "error", f"{type(e).__name__}: {e}"


def _record(env: TableRun, res: ActionResult, results: list[ActionResult], t0: float,
            duration_s: float | None = None) -> bool:
    """Append ``res``; True when the table must stop (an error, or rows that did not verify)."""
    res.duration_s = round(time.monotonic() - t0 if duration_s is None else duration_s, 3)
    results.append(res)
    if res.status == "verification_failed":
        log.error("%s: verification failed, stopping this table: %s", env.table.name, res.error)
        return True
    if env.progress:
        env.progress(ActionFinished(env.table.name, res))
    return res.status == "error"


class _BinProgress:
    """Bins and bytes rewritten so far in one table, reported through the progress callback."""

    def __init__(self, env: TableRun, actions: Sequence[Action]) -> None:
        self.progress, self.table = env.progress, env.table.name
        rewrites = [a for a in actions if isinstance(a, RewriteAction)]
        self.bins_total = sum(len(a.bins) for a in rewrites)
        self.bytes_total = sum(a.input_bytes for a in rewrites)
        self.bins = self.bytes = 0
        self.lock = threading.Lock()

    def done(self, input_bytes: int) -> None:
        if self.progress is None:
            return
        with self.lock:
            self.bins += 1
            self.bytes += input_bytes
            event = BinsDone(self.table, self.bins, self.bins_total, self.bytes, self.bytes_total)
        self.progress(event)


def _context(env: TableRun, key: str, state: TableState, session: TableSession, **extra: Any) -> ActionContext:
    """The ActionContext of action(s) ``key`` ("3", or "3-7" for a commit group): commit metadata included."""
    return ActionContext(table=env.table, state=state, target=env.target, engine=env.engines,
                         commit_metadata={"compactor.version": __version__, "compactor.run_id": env.run_id,
                                          "compactor.plan": env.plan.generated_at,
                                          "compactor.action": f"{env.run_id}:{env.table.name}:{key}"},
                         dry_run=env.dry_run, watch_s=env.watch_s, session=session,
                         fence=env.lease.check if env.lease is not None else None, **extra)


def _run_action(env: TableRun, i: int, planned: Action, res: ActionResult, state: TableState,
                session: TableSession) -> None:
    """Check the precondition on ``state``, run the action; fills ``res``."""
    table, fmt = env.table, env.fmt
    action = planned
    res.table_version_before = state.version
    try:
        action.check(fmt.live_paths(state))
    except StalePlanError:
        if not env.replan_stale or not isinstance(action, RewriteAction):
            raise
        action = replan(action, state)
        res.details.replanned = True
    if action.rewrites:
        res.rows_before = action.rows
    if env.progress:
        env.progress(ActionStarted(table.name, action.type, action.partition, action.input_bytes, i,
                                   len(table.actions)))
    if env.dry_run and not action.runs_in_dry_run:
        res.status = "skipped"
        res.details.dry_run, res.details.would_rewrite_files = True, action.input_files
        res.details.would_write_files = action.expected_output_files
        return
    ctx = _context(env, str(i), state, session)
    if env.lease is not None:
        env.lease.check()
    if env.watch is not None:
        with env.watch.lock:  # the watch's repairs never interleave with this table's own commits
            outcome = fmt.run(action, ctx)
    else:
        outcome = fmt.run(action, ctx)
    res.record(outcome)
    if env.watch is not None and outcome.removed_paths and outcome.version_after is not None \
            and outcome.details.repaired is None and not env.dry_run:
        env.watch.add(int(outcome.version_before or 0), outcome.version_after, outcome.removed_paths, res)
    res.status = "skipped" if env.dry_run else "success"
