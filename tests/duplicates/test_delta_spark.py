"""A real delta-spark OPTIMIZE racing a compactor apply on the same partition, both orders (issue #11,
item 4). Measured: delta-spark's conflict checker refuses OPTIMIZE when compactor committed first
(ConcurrentDeleteReadException: a concurrent WRITE deleted data it read); when OPTIMIZE commits first,
compactor's re-check makes its action stale, and inside the window the re-check cannot close its own commit
does (it is written only at a version it checked); where delta-rs writes compactor's commit, delta-rs lets it
land and the post-commit guard reverts it. Every row is live exactly once."""

from __future__ import annotations

import threading
import time
from pathlib import Path

import compactor.formats.delta.apply.commit as commit_mod
from compactor.engines.local import LocalEngine
from compactor.formats.delta.duplicates.repair import detect
from compactor.formats.delta.read.log import read_commit
from compactor.models.table import TableLocation
from compactor.project.model import Target
from compactor.tasks.apply import apply_plan
from tests.apply.helpers import exactly_once, make_table, plan_for

PART = "date = '2024-01-01'"


def _optimize(spark, t: Path) -> None:
    spark.sql(f"OPTIMIZE delta.`{t}` WHERE {PART}").collect()


def _table(t: Path) -> int:
    return make_table(t, partitions=1, appends=4, rows=10)


def _operations(t: Path, after: int) -> list[str]:
    out, v = [], after + 1
    while (c := read_commit(TableLocation(str(t)), v)) is not None:
        out.append("compactor" if c.metadata("compactor.action") else c.info.get("operation", "?"))
        v += 1
    return out


class _Gated(LocalEngine):
    """compactor's rewrite, held back right before the commit until the test opens the gate."""

    def __init__(self) -> None:
        super().__init__()
        self.written, self.gate = threading.Event(), threading.Event()

    def rewrite(self, jobs, schema, on_done=None):
        out = super().rewrite(jobs, schema, on_done)
        self.written.set()
        assert self.gate.wait(120)
        return out


def test_optimize_that_read_before_compactor_committed_is_refused_by_delta_spark(tmp_path: Path, delta_spark) -> None:
    refused = 0
    for attempt in range(3):
        t = tmp_path / f"t{attempt}"
        n = _table(t)
        v0 = int(detect(TableLocation(str(t))).version)
        delta_spark.read.format("delta").load(str(t)).count()  # the snapshot is warm: OPTIMIZE's job starts fast
        engine = _Gated()
        runs: list = []
        applying = threading.Thread(target=lambda: runs.append(apply_plan(plan_for(t), target=Target(), engine=engine,
                                                                          watch_s=0)))
        applying.start()
        assert engine.written.wait(60)
        errors: list[BaseException] = []

        def optimize() -> None:
            try:
                _optimize(delta_spark, t)
            except Exception as e:  # noqa: BLE001 - the outcome under test
                errors.append(e)

        optimizing = threading.Thread(target=optimize)
        optimizing.start()
        tracker = delta_spark.sparkContext.statusTracker()
        deadline = time.monotonic() + 60
        while not tracker.getActiveJobsIds() and optimizing.is_alive() and time.monotonic() < deadline:
            time.sleep(0.005)
        engine.gate.set()  # OPTIMIZE has its snapshot and is rewriting: compactor commits now
        applying.join(120)
        optimizing.join(300)
        exactly_once(t, n)
        assert runs[0].ok and runs[0].results[0].status == "success"
        ops = _operations(t, v0)
        if errors:
            assert type(errors[0]).__name__ in ("ConcurrentDeleteReadException", "ConcurrentDeleteDeleteException"), \
                errors[0]
            assert ops == ["compactor"]
            refused += 1
            print(f"\nattempt {attempt}: OPTIMIZE refused: {type(errors[0]).__name__}")
        else:  # OPTIMIZE read after compactor's commit: nothing left to compact in the partition
            assert ops == ["compactor"], ops
        if refused:
            break
    assert refused, "OPTIMIZE never read the table before compactor committed in 3 attempts"


class _OptimizeDuringRewrite(LocalEngine):
    def __init__(self, spark) -> None:
        super().__init__()
        self.spark = spark

    def rewrite(self, jobs, schema, on_done=None):
        out = super().rewrite(jobs, schema, on_done)
        _optimize(self.spark, Path(jobs[0].output).parents[1])  # delta-spark commits first
        return out


def test_optimize_committing_before_compactor_makes_compactor_stale(tmp_path: Path, delta_spark) -> None:
    t = tmp_path / "t"
    n = _table(t)
    v0 = int(detect(TableLocation(str(t))).version)
    run = apply_plan(plan_for(t), target=Target(), engine=_OptimizeDuringRewrite(delta_spark), watch_s=0)
    (r,) = run.results
    assert r.status == "stale" and "removed by a concurrent commit" in r.error
    assert _operations(t, v0) == ["OPTIMIZE"]
    exactly_once(t, n)


def test_optimize_committing_inside_compactors_commit_window_makes_compactor_stale(tmp_path: Path, delta_spark,
                                                                                  monkeypatch) -> None:
    """OPTIMIZE lands after compactor's last re-check: compactor writes its commit only at a version it has
    checked (formats/delta/apply/log_writer.py), finds OPTIMIZE's removes there and commits nothing."""
    t = tmp_path / "t"
    n = _table(t)
    v0 = int(detect(TableLocation(str(t))).version)
    recheck = commit_mod.removed_since

    def recheck_then_optimize(*args, **kwargs):
        found = recheck(*args, **kwargs)
        _optimize(delta_spark, t)
        return found

    monkeypatch.setattr(commit_mod, "removed_since", recheck_then_optimize)
    run = apply_plan(plan_for(t), target=Target(), watch_s=0)
    (r,) = run.results
    assert r.status == "stale" and "this commit removes" in r.error, r.error
    assert _operations(t, v0) == ["OPTIMIZE"]
    exactly_once(t, n)


def test_optimize_committing_inside_delta_rs_commit_window_is_reverted(tmp_path: Path, delta_spark,
                                                                      monkeypatch) -> None:
    """Where delta-rs writes compactor's commit (a locking provider, a writer feature compactor's log writer
    does not know), it does not refuse compactor's commit (it removes files OPTIMIZE removed), so the
    post-commit guard reverts compactor's commit at once."""
    from compactor.formats.delta.apply import log_writer
    t = tmp_path / "t"
    n = _table(t)
    v0 = int(detect(TableLocation(str(t))).version)
    recheck = commit_mod.removed_since

    def recheck_then_optimize(*args, **kwargs):
        found = recheck(*args, **kwargs)
        _optimize(delta_spark, t)
        return found

    monkeypatch.setattr(commit_mod, "removed_since", recheck_then_optimize)
    monkeypatch.setattr(log_writer, "writes_directly", lambda dt, where: False)
    run = apply_plan(plan_for(t), target=Target(), watch_s=0)
    (r,) = run.results
    assert r.status == "success" and r.details.repaired.conflicting_versions == [v0 + 1]
    assert _operations(t, v0) == ["OPTIMIZE", "compactor", "compactor"]  # the rewrite and its repair
    exactly_once(t, n)
    assert detect(TableLocation(str(t))).open == []
