"""compactor's steps in the Iceberg fuzzer's histories (tests/fuzz/iceberg_history.py), each checked right
after it ran: a compaction planned now or earlier and applied (only the planned files leave the current
snapshot, one new file per bin, no committed file deleted from disk, a fresh plan never stale), an apply
killed at a crash point and the recovering apply after it (no journal entry and no new orphan left), the
retention planned and applied, raced by a writer (only the planned snapshots expire, only listed files are
deleted, a file a writer committed after the plan listed it is kept), and ``OPS``: the weighted choice of
a history's next step. ``settle`` is a history's end: plan -> apply -> plan converges."""

from __future__ import annotations

import os
import random
import time
from collections import Counter
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import TYPE_CHECKING, Any

from compactor import api
from compactor.formats.iceberg import retention_run
from compactor.formats.iceberg.retention_actions import ExpireSnapshotsAction, IcebergRetentionAction
from compactor.models.results import ActionResult
from compactor.planning.actions import CompactAction
from compactor.planning.plan import Plan
from compactor.runtime import faults
from tests.formats.contract.lake import _lease_of_a_dead_process, killed_at
from tests.fuzz.iceberg_checks import Failure, data_on_disk, journal_entries, live_files, local, plain
from tests.fuzz.iceberg_history import CRASH_POINTS, IcebergHistory

if TYPE_CHECKING:
    from pyiceberg.manifest import DataFile


def _actions(plan: Plan, kind: type[Any]) -> list[Any]:
    return [a for t in plan.tables for a in t.actions if isinstance(a, kind)]


def _results(results: list[ActionResult], kind: str) -> list[ActionResult]:
    return [r for r in results if r.type == kind]


def plan_compaction(h: IcebergHistory) -> list[int]:
    _, path = h.plan()
    h.plans.append(path)
    h.log.append(f"compactor plans ({path.name}, at {h.name(h.table().metadata.current_snapshot_id)})")
    return []


def apply_compaction(h: IcebergHistory, *, earlier: bool | None = None, race: str | None = None) -> list[int]:
    """A saved plan (made some operations ago: each action stale or exact) or one made now, applied: the
    current snapshot loses exactly the inputs of the successful actions and gains one file per bin; no file
    the metadata referenced before is deleted from disk. ``race``: the writer that commits during the apply
    (``raced_apply``), whose own removals are not compactor's."""
    if earlier is None:
        earlier = bool(h.plans) and h.rng.random() < 0.7
    path = h.plans.pop(0) if earlier else h.plan()[1]
    how = "planned earlier" if earlier else f"raced by {race}" if race else "planned now"
    plan = api.load_plan(path)
    t = h.table()
    live, referenced, disk = live_files(t), h.refs.of(t), data_on_disk(t)
    if race:
        h.log.append(f"compactor applies {path.name}, raced by a writer once its outputs are written:")
    run = h.apply(path)
    actions, results = _actions(plan, CompactAction), _results(run.results, "compact")
    if len(actions) != len(results):
        raise Failure(f"{len(actions)} compact action(s) planned, {len(results)} result(s)")
    removed: set[str] = set()
    bins = 0
    for a, r in zip(actions, results, strict=True):
        h.done[f"compact {r.status} ({how})"] += 1
        if r.status == "success":
            removed |= {plain(p) for p in a.input_paths}
            bins += len(a.bins)
        elif r.status != "stale" or not (earlier or race):
            raise Failure(f"compact action ({how}): {r.status}: {r.error}")
    h.log.append(f"compactor applies {path.name} ({how}): {[r.status for r in results]}")
    new = h.record(None)
    if race:
        live = _live_before_compactor(h, set(new))
    t = h.table()
    after = live_files(t)
    if live - after != removed:
        raise Failure(f"the apply removed {sorted(live - after)[:3]} from the current snapshot, planned and "
                      f"committed: {sorted(removed)[:3]}")
    if len(after - live) != bins:
        raise Failure(f"the apply added {len(after - live)} file(s) for {bins} committed bin(s)")
    deleted = disk - data_on_disk(t)
    if deleted & referenced:
        raise Failure(f"the apply deleted files the metadata referenced: {sorted(deleted & referenced)[:3]}")
    h.check(None)
    return new


def _live_before_compactor(h: IcebergHistory, replaces: set[int]) -> set[str]:
    """The live files of the snapshot compactor's first replace (of ``replaces``) committed on: a racing
    writer's when it landed before, the current one when compactor committed nothing."""
    t = h.table()
    at = t.metadata.current_snapshot_id
    while at in replaces:
        snapshot = t.metadata.snapshot_by_id(at)
        assert snapshot is not None
        at = snapshot.parent_snapshot_id
    return {plain(str(task.file.file_path)) for task in t.scan(snapshot_id=at).plan_files()} if at is not None else set()


def raced_apply(h: IcebergHistory) -> list[int]:
    """An apply planned now, raced by another writer's commit once its outputs are written (crash point
    ``iceberg.outputs_written``, not a kill: the run goes on to its commit): each action commits exactly or
    is stale, nothing else leaves the current snapshot, no committed file is deleted from disk."""
    race = h.rng.choice(["append", "delete", "update", "position delete", "append, position delete", "rollback",
                         "expire"])
    writer = {"append": h.append, "delete": h.delete, "update": h.update, "position delete": h.position_delete,
              "append, position delete": lambda: h.append("main", part=0) + h.position_delete(),
              "rollback": h.refs_change, "expire": h.expire}[race]
    raced: list[str] = []

    def hook(point: str) -> None:
        if point == "iceberg.outputs_written" and not raced:
            raced.append(point)
            writer()

    previous = faults.set_hook(hook)
    try:
        return apply_compaction(h, earlier=False, race=race)
    finally:
        faults.set_hook(previous)


def _work(h: IcebergHistory) -> list[int]:
    """A writer's two small files in one partition: the next plan has a bin."""
    return h.append("main", part=0) + h.append("main", part=0)


def killed_apply(h: IcebergHistory) -> list[int]:
    """An apply (with work: ``_work``) killed at a random crash point (as a kill leaves the catalog and the
    warehouse), then an apply (with work again) that recovers the killed run and succeeds: no journal entry
    is left, nor any orphan that was not one before."""
    point = h.rng.choice(CRASH_POINTS)
    made = _work(h)
    t = h.table()
    table_path, orphans = h.table_path, data_on_disk(t) - h.refs.of(t)
    _, path = h.plan()
    reached = killed_at(point, h.root, h.root.parent / f"{h.root.name}-killed", lambda: h.apply(path))
    h.forget_catalog()
    if reached:
        _lease_of_a_dead_process(table_path)
    h.done[f"killed at {point}" if reached else f"{point} not reached"] += 1
    h.log.append(f"compactor apply killed at {point}" if reached else f"compactor apply ({point} not reached)")
    made += h.record(None)
    h.check(made)
    made += _work(h)
    _, path = h.plan()
    run = h.apply(path)
    statuses = [r.status for r in run.results]
    h.log.append(f"compactor applies after the kill: {statuses}")
    if any(s != "success" for s in statuses) or not statuses:
        raise Failure(f"the recovering apply: {[(r.type, r.status, r.error) for r in run.results]}")
    made += h.record(None)
    t = h.table()
    left = journal_entries(t)
    if left:
        raise Failure(f"journal entries left after the recovering apply: {left}")
    new = data_on_disk(t) - h.refs.of(t) - orphans
    if new:
        raise Failure(f"orphans left after the recovering apply: {sorted(new)[:3]}")
    h.check(None)
    return made


# ---------------------------------------------------------------------- retention


def _prepared(h: IcebergHistory) -> tuple[list[DataFile], Callable[[], None]]:
    """A writer's data files written a second ago and the commit of them (a fast append) to run later."""
    from pyiceberg.io.pyarrow import _dataframe_to_data_files

    t = h.table()
    rows = h.new_rows(h.rng.randint(1, 3))
    files = list(_dataframe_to_data_files(t.metadata, h.frame(t, rows), t.io))
    for f in files:  # written a second ago: older than the plan's horizon even at 0s (the same ms is not)
        at = time.time() - 1
        os.utime(local(str(f.file_path)), (at, at))

    def commit() -> None:
        before = h.rows()
        other = h.table()
        with other.transaction() as tx, tx.update_snapshot().fast_append() as append:
            for f in files:
                append.append_data_file(f)
        h.log.append(f"a writer commits {len(files)} file(s) written before the plan (ids {rows[0][0]}..{rows[-1][0]})")
        h.record(before + Counter(rows))

    return files, commit


@contextmanager
def _before_the_gate(run: Callable[[], None]) -> Iterator[None]:
    """``run()`` once, right before apply's retention deletes (after its own checks, before the deletion
    gate reads the metadata again)."""
    real = retention_run.delete_proved
    ran: list[bool] = []

    def racing(*args: Any, **kwargs: Any) -> Any:
        if not ran:
            ran.append(True)
            run()
        return real(*args, **kwargs)

    retention_run.delete_proved = racing  # type: ignore[assignment]
    try:
        yield
    finally:
        retention_run.delete_proved = real  # type: ignore[assignment]


def retention(h: IcebergHistory) -> list[int]:
    """compactor's retention planned and applied, raced (module docstring): only the planned snapshots
    expire, only listed files are deleted from disk, a listed file a writer committed is kept."""
    race = h.rng.choice(["none", "none", "append", "tag", "rollback", "expire", "delete", "prepared",
                         "prepared at the gate"])
    files, commit = _prepared(h) if race.startswith("prepared") else ([], None)
    plan, path = h.plan("retain")
    expire = _actions(plan, ExpireSnapshotsAction)
    planned_snapshots = set(expire[0].snapshots) if expire else set()
    listed = {plain(p) for a in _actions(plan, IcebergRetentionAction) for p in a.files}
    h.log.append(f"compactor plans retention: expire {h.name(*[s for s in h.oracle if s in planned_snapshots])}, "
                 f"{len(listed)} file(s)")
    if race == "tag" and planned_snapshots:
        sid, tag = h.rng.choice([s for s in h.oracle if s in planned_snapshots]), f"late{len(h.log)}"  # commit order
        h.table().manage_snapshots().create_tag(sid, tag).commit()
        h.log.append(f"tag {tag} on planned {h.name(sid)}")
    elif race == "prepared" and commit is not None:
        commit()
    elif race in ("append", "rollback", "expire", "delete"):
        {"append": h.append, "rollback": h.refs_change, "expire": h.expire, "delete": h.delete}[race]()
    t = h.table()
    snapshots, disk = {s.snapshot_id for s in t.metadata.snapshots}, data_on_disk(t)
    if race == "prepared at the gate" and commit is not None:
        with _before_the_gate(commit):
            run = h.apply(path, "retain")
    else:
        run = h.apply(path, "retain")
    for r in run.results:
        h.done[f"{r.type} {r.status} (race: {race})"] += 1
        if r.status != "success" and not (r.status == "stale" and race != "none"):
            raise Failure(f"{r.type} (race: {race}): {r.status}: {r.error}")
    h.log.append(f"compactor applies retention (race: {race}): {[(r.type, r.status) for r in run.results]}")
    made = h.record(None)
    t = h.table()
    expired = snapshots - {s.snapshot_id for s in t.metadata.snapshots}
    if expired - planned_snapshots:
        raise Failure(f"snapshots expired that the plan did not list: {sorted(expired - planned_snapshots)}")
    deleted = disk - data_on_disk(t)
    if deleted - listed:
        raise Failure(f"files deleted that the plan did not list: {sorted(deleted - listed)[:3]}")
    gone = [plain(str(f.file_path)) for f in files if plain(str(f.file_path)) in deleted]
    if race.startswith("prepared") and gone:
        raise Failure(f"a file a writer committed after the plan was deleted: {gone[:3]}")
    h.check(None)
    return made


# ---------------------------------------------------------------------- a history's end


def settle(h: IcebergHistory) -> None:
    """plan -> apply -> plan: no compact action is left, then the retention converges too."""
    h.check(None)
    for project, kind in (("compact", CompactAction), ("retain", IcebergRetentionAction)):
        _, path = h.plan(project)
        run = h.apply(path, project)
        h.done.update(f"{r.type} {r.status} (at the end)" for r in run.results)
        bad = [(r.type, r.status, r.error) for r in run.results if r.status != "success"]
        if bad:
            raise Failure(f"the last {project} apply: {bad}")
        h.record(None)
        h.check(None)
        left = _actions(h.plan(project)[0], kind)
        if left:
            raise Failure(f"plan -> apply -> plan does not converge: {len(left)} {left[0].type} action(s) left")
        h.log.append(f"compactor {project}: {len(run.results)} action(s), then nothing left to plan")


OPS: list[tuple[float, Callable[[IcebergHistory], list[int]]]] = [
    (5, IcebergHistory.append), (1.5, IcebergHistory.delete), (1.2, IcebergHistory.update),
    (0.6, IcebergHistory.upsert), (0.7, IcebergHistory.evolve), (1, IcebergHistory.refs_change),
    (0.6, IcebergHistory.expire), (0.8, IcebergHistory.position_delete), (0.3, IcebergHistory.abandoned_write),
    (1.5, plan_compaction), (2.5, apply_compaction), (1, raced_apply), (0.8, killed_apply), (1, retention),
]


def step(h: IcebergHistory) -> None:
    """One weighted random step, then the checks after every operation."""
    op = h.rng.choices([f for _, f in OPS], [w for w, _ in OPS])[0]
    made = op(h)
    h.check(made + h.rng.sample(list(h.oracle), min(2, len(h.oracle))))


def start(root: Path, seed: int) -> IcebergHistory:
    """The history of ``seed``: its table created in a catalog under ``root``, with its first rows."""
    root.mkdir(parents=True)
    h = IcebergHistory(root, random.Random(seed))
    h.create()
    return h
