"""Seeded random histories on a real delta-rs table, with an oracle of the rows each version must hold.

Operations (``OPS``): appends, DELETE, UPDATE, MERGE (upsert), RESTORE, ADD COLUMN, delta-rs
``optimize.compact()`` (also from a handle loaded a few operations earlier: the duplicate hazard of
delta-compaction.md), compactor ``apply`` (its plan made now, or a few operations earlier: stale), a
compactor apply killed at a random crash point (runtime/faults.py; the next apply recovers), checkpoints
and VACUUM with zero retention, by delta-rs and by compactor's apply (dry_run_first, raced). Column mapping + RENAME COLUMN is not generated: delta-rs cannot write
those commits (tests/schema writes them by hand, as delta-spark does, between two commit groups).

The oracle is a dict id -> value per table version; compactor and optimize never change it; RESTORE
brings back the oracle of the version restored (never to before a VACUUM: Delta cannot either).
"""

from __future__ import annotations

import json
import random
import subprocess
import sys
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, TypeVar

import pyarrow as pa
import pyarrow.parquet as pq
from deltalake import DeltaTable, write_deltalake

from compactor.formats.delta.read.vacuum_listing import vacuum_candidates
from compactor.models.results import ActionResult
from compactor.models.table import TableLocation
from compactor.project.model import Target
from compactor.runtime import faults, liveness
from compactor.tasks.apply import apply_plan
from tests.apply.helpers import apply_racing_the_vacuum, one_action_plan, plan_for, vacuum_reviewing

Row = tuple[int, int]  # (id, value)
T = TypeVar("T")
CRASH_POINTS = ("delta.journal_written", "delta.outputs_written", "delta.before_commit", "delta.after_commit",
                "delta.repair_after_commit",
                "delta.repair_before_commit", "lease.acquired")


#: the table property compactor's VACUUM at zero retention needs (it never goes below the table's)
ZERO_RETENTION = ("delta.deletedFileRetentionDuration", "interval 0 hours")


class Killed(BaseException):
    """A simulated SIGKILL: raised at a crash point, it unwinds past every ``except Exception``."""


def apply_killable(apply: Callable[[], T], crash_at: str | None, table: Path) -> T | None:
    """``apply()`` with a simulated SIGKILL at crash point ``crash_at`` (None: nothing armed). None when it was
    killed there: the run stopped at that point, its lease left as a killed process leaves it."""
    hook = None
    if crash_at is not None:
        def hook(point: str) -> None:
            if point == crash_at:
                raise Killed(point)
    previous = faults.set_hook(hook)
    try:
        return apply()
    except Killed:
        _as_killed_process(table)
        return None
    finally:
        faults.set_hook(previous)


def vacuum_through_apply(table: Path, *, after_listing: Callable[[], None] | None = None,
                         race: Callable[[], None] | None = None, target: Target = Target(), engine: Any = None,
                         partition_columns: tuple[str, ...] = ("p",), retention_hours: int = 0,
                         ) -> tuple[tuple[str, ...] | None, ActionResult, set[str]]:
    """compactor's VACUUM through apply with ``dry_run_first``, as `compactor plan` lists it now: ``after_listing``
    runs between that listing and the plan (a plan made before it), ``race`` between apply's own listing and
    its delete (crash point ``delta.vacuum_listed``). Returns the plan's list, the action's result and the
    files it deleted, which must be files the plan listed."""
    listed = vacuum_candidates(TableLocation(str(table)), retention_hours)
    if after_listing is not None:
        after_listing()
    plan = one_action_plan(str(table), vacuum_reviewing(listed, retention_hours=retention_hours),
                           engine=target.engine, partition_columns=partition_columns)
    run = apply_racing_the_vacuum(plan, race, target=target, engine=engine, watch_s=0)
    (r,) = run.results
    deleted = set(r.details.files or ()) if r.status == "success" else set()
    assert deleted <= set(listed or ()), f"deleted files the plan did not list: {sorted(deleted - set(listed or ()))}"
    return listed, r, deleted


def _as_killed_process(table: Path) -> None:
    """What a SIGKILL leaves differs from the simulated one in one way: the killed run's process is gone.
    The lease the simulated kill left (killed right after acquiring it, before any ``finally`` could release
    it) names this test's live process; it is rewritten to name a process that provably no longer runs, as
    a real killed run's lease would (runtime/liveness.py)."""
    lease = table / "_compactor" / "lease.json"
    if not lease.exists():
        return
    info = json.loads(lease.read_text())
    if info.get("identity") == liveness.identity() and not info.get("released"):
        dead = subprocess.run([sys.executable, "-c", "import os; print(os.getpid())"], capture_output=True,
                              text=True, check=True)
        pid = int(dead.stdout)
        lease.write_text(json.dumps({**info, "pid": pid, "identity": liveness.identity_of(pid)}, sort_keys=True))


@dataclass
class History:
    path: Path
    rng: random.Random
    #: oracle: version -> {id: value}
    oracle: dict[int, dict[int, int]] = field(default_factory=dict)
    log: list[str] = field(default_factory=list)
    next_id: int = 0
    #: RESTORE never goes below this version (a VACUUM ran after it)
    floor: int = 0
    extra_column: bool = False
    #: handles and plans read earlier, used later (stale readers)
    handles: list[DeltaTable] = field(default_factory=list)
    plans: list[Any] = field(default_factory=list)

    @property
    def version(self) -> int:
        return DeltaTable(str(self.path)).version()

    def rows_at(self, version: int) -> dict[int, int]:
        """The oracle of ``version``: that of the latest version recorded at or before it (maintenance
        commits in between, compactor's commit groups among them, change no row)."""
        return self.oracle[max(v for v in self.oracle if v <= version)]

    def expected(self) -> dict[int, int]:
        return self.rows_at(self.version)

    def _after(self, rows: dict[int, int]) -> None:
        self.oracle[self.version] = dict(rows)

    # ------------------------------------------------------------------ data changes

    def append(self) -> None:
        k = self.rng.randint(1, 4)
        ids = list(range(self.next_id, self.next_id + k))
        self.next_id += k
        part = self.rng.randint(0, 1)
        cols: dict[str, Any] = {"p": pa.array([part] * k, pa.int64()), "id": pa.array(ids, pa.int64()),
                                "val": pa.array([0] * k, pa.int64())}
        if self.extra_column:
            cols["note"] = pa.array(["n"] * k, pa.string())
        rows = dict(self.expected()) if self.path.exists() and (self.path / "_delta_log").exists() else {}
        write_deltalake(str(self.path), pa.table(cols), mode="append", partition_by=["p"],
                        schema_mode="merge" if self.extra_column else None)
        rows.update({i: 0 for i in ids})
        self._after(rows)
        self.log.append(f"append {ids} p={part}")

    def delete(self) -> None:
        c = self.rng.randint(0, 6)
        DeltaTable(str(self.path)).delete(f"id % 7 = {c}")
        self._after({i: v for i, v in self.expected().items() if i % 7 != c})
        self.log.append(f"delete id%7={c}")

    def update(self) -> None:
        c = self.rng.randint(0, 4)
        DeltaTable(str(self.path)).update(updates={"val": "val + 1"}, predicate=f"id % 5 = {c}")
        self._after({i: v + 1 if i % 5 == c else v for i, v in self.expected().items()})
        self.log.append(f"update id%5={c}")

    def merge(self) -> None:
        ids = self.rng.sample(range(max(1, self.next_id + 2)), 2)
        src = pa.table({"p": pa.array([i % 2 for i in ids], pa.int64()), "id": pa.array(ids, pa.int64()),
                        "val": pa.array([7, 7], pa.int64())})
        (DeltaTable(str(self.path)).merge(src, "t.id = s.id", source_alias="s", target_alias="t")
         .when_matched_update(updates={"val": "s.val"}).when_not_matched_insert_all().execute())
        rows = dict(self.expected())
        rows.update({i: 7 for i in ids})
        self.next_id = max(self.next_id, max(ids) + 1)
        self._after(rows)
        self.log.append(f"merge {ids}")

    def restore(self) -> None:
        if self.version <= self.floor:
            return
        v = self.rng.randint(self.floor, self.version - 1)
        rows = self.rows_at(v)
        DeltaTable(str(self.path)).restore(v)
        self._after(rows)
        self.log.append(f"restore {v}")

    def add_column(self) -> None:
        if self.extra_column:
            return
        from deltalake.schema import Field, PrimitiveType

        DeltaTable(str(self.path)).alter.add_columns([Field("note", PrimitiveType("string"), nullable=True)])
        self.extra_column = True
        self._after(self.expected())
        self.log.append("add column note")

    # ------------------------------------------------------------------ maintenance

    def read_handle(self) -> None:
        self.handles.append(DeltaTable(str(self.path)))
        self.log.append("another job loads the table")

    def optimize(self) -> None:
        dt = self.handles.pop(0) if self.handles and self.rng.random() < 0.85 else DeltaTable(str(self.path))
        try:
            dt.optimize.compact()
            self.log.append(f"delta-rs optimize (read v{dt.version()})")
        except Exception as e:  # noqa: BLE001 - refused by delta-rs' conflict checker: nothing committed
            self.log.append(f"delta-rs optimize refused: {type(e).__name__}")
        self._after(self.expected_before_maintenance())

    def expected_before_maintenance(self) -> dict[int, int]:
        return self.oracle[max(self.oracle)]

    def plan(self) -> None:
        self.plans.append(plan_for(self.path, target_size=1 << 20))
        self.log.append("compactor plans")

    def apply(self, crash_at: str | None = None) -> None:
        plan = self.plans.pop(0) if self.plans and self.rng.random() < 0.6 else plan_for(self.path, target_size=1 << 20)
        before = self.expected_before_maintenance()
        target = Target(commit_every_bins=self.rng.choice([1, 100]))
        run = apply_killable(lambda: apply_plan(plan, target=target, watch_s=0), crash_at, self.path)
        self.log.append(f"compactor apply killed at {crash_at}" if run is None else
                        "compactor apply" + (f" (crash point {crash_at} not reached)" if crash_at else ""))
        self._after(before)

    def race(self) -> None:
        """The hazard of delta-compaction.md in one step: another job loads the table, compactor applies,
        the other job's optimize commits from its old snapshot (or compactor applies a plan made before
        the other job's optimize)."""
        if self.rng.random() < 0.5:
            self.read_handle()
            self.apply()
            self.optimize()
        else:
            self.plan()
            self.optimize()
            self.apply()

    def checkpoint(self) -> None:
        DeltaTable(str(self.path)).create_checkpoint()
        self.log.append("checkpoint")

    def vacuum(self) -> None:
        DeltaTable(str(self.path)).vacuum(retention_hours=0, enforce_retention_duration=False, dry_run=False)
        self.floor = self.version
        self.handles.clear()  # a job that read the table before VACUUM would read deleted files
        self.log.append("vacuum retention 0")

    def compactor_vacuum(self) -> None:
        """compactor's VACUUM through apply, at zero retention, with dry_run_first: its list made now, or
        before an optimize removed more files (then refused, nothing deleted); or an optimize commits
        between apply's listing and its delete (its removed files stay). Whatever happens, only files the
        plan listed are deleted, and the log names no missing file."""
        dt = DeltaTable(str(self.path))
        if dt.metadata().configuration.get(ZERO_RETENTION[0]) != ZERO_RETENTION[1]:
            dt.alter.set_table_properties(dict([ZERO_RETENTION]))  # a RESTORE may have taken it back
        before = self.expected_before_maintenance()
        how = self.rng.choice(["now", "optimize after the listing", "optimize racing the delete"])

        def optimize() -> None:
            DeltaTable(str(self.path)).optimize.compact()

        _, r, _ = vacuum_through_apply(self.path, after_listing=optimize if how == "optimize after the listing" else None,
                                       race=optimize if how == "optimize racing the delete" else None)
        self.floor = self.version
        self.handles.clear()
        assert r.status == "success" or (how == "optimize after the listing" and "would now delete" in (r.error or "")), \
            f"compactor vacuum, {how}: {r.status}: {r.error}"
        self._after(before)
        self.log.append(f"compactor vacuum, {how}: {r.status} ({r.files_removed} deleted)")


OPS: list[tuple[float, Callable[[History], None]]] = [
    (6, History.append), (1.2, History.delete), (1.2, History.update), (0.8, History.merge),
    (0.8, History.restore), (0.4, History.add_column), (2.5, History.read_handle), (2.5, History.optimize),
    (1.5, History.plan), (3, History.apply), (1.5, lambda h: h.apply(h.rng.choice(CRASH_POINTS))),
    (0.5, History.checkpoint), (0.4, History.vacuum), (1.2, History.race), (0.4, History.compactor_vacuum),
]


def rows_on_storage(path: Path) -> tuple[Counter[Row], list[str]]:
    """Every live row (file by file, as the log lists them) and the files the log lists that are missing."""
    dt = DeltaTable(str(path))
    rows: Counter[Row] = Counter()
    missing = []
    for uri in dt.file_uris():
        if not Path(uri).exists():
            missing.append(uri)
            continue
        t = pq.read_table(uri, columns=["id", "val"])
        rows.update(zip(t.column("id").to_pylist(), t.column("val").to_pylist()))
    return rows, missing


def generate(path: Path, seed: int, steps: int) -> History:
    rng = random.Random(seed)
    h = History(path, rng)
    h.append()
    weights = [w for w, _ in OPS]
    for _ in range(steps):
        op = rng.choices([f for _, f in OPS], weights)[0]
        op(h)
    return h
