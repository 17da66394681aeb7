"""The spark engine rewrites a commit group's bins in ONE Spark job (a task per bin), counted from Spark's
own job tracker; the sequential profile (``max_concurrent_rewrites: 1``) runs a job per bin. Each bin
becomes one file, rows stay exactly once, nothing of the staging is left, and the session's union
setting is as it was. A group is one scan of its files, its rows tagged with their bin by file name (a
union of per-bin reads where names repeat); a file whose rows would belong to no bin fails the group."""

from __future__ import annotations

import json
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from deltalake import DeltaTable, write_deltalake
from deltalake.transaction import AddAction

from compactor.engines.spark import UNION_PARTITIONING, SparkEngine
from compactor.project.model import Target
from compactor.tasks.apply import apply_plan
from tests.apply.helpers import exactly_once, make_table, plan_for

pytestmark = pytest.mark.spark


def _jobs(spark) -> int:
    return len(spark.sparkContext.statusTracker().getJobIdsForGroup())


@pytest.mark.parametrize("threads, jobs", [(None, 1), (1, 4)])
def test_a_commit_group_is_one_spark_job(spark, tmp_path: Path, threads: int | None, jobs: int) -> None:
    t = tmp_path / "t"
    n = make_table(t, partitions=4, appends=3)
    target = Target(engine="spark", threads=threads)
    plan = plan_for(t, engine="spark", method="rewrite")
    assert sum(len(a.bins) for a in plan.tables[0].actions) == 4
    setting = spark.conf.get(UNION_PARTITIONING)
    before = _jobs(spark)
    run = apply_plan(plan, target=target, engine=SparkEngine(target), watch_s=0)
    assert run.ok, [r.error for r in run.results]
    assert _jobs(spark) - before == jobs
    assert len(DeltaTable(str(t)).file_uris()) == 4
    exactly_once(t, n)
    assert not list(t.rglob("_compactor_staging_*")) and not list(t.rglob("__compactor_bin*"))
    assert spark.conf.get(UNION_PARTITIONING) == setting


def _write_tasks(spark, job: int) -> int:
    """Tasks of the last stage of Spark job ``job`` (the write)."""
    tracker = spark.sparkContext.statusTracker()
    return tracker.getStageInfo(max(tracker.getJobInfo(job).stageIds)).numTasks


def test_a_group_is_one_scan_and_a_write_of_at_most_two_tasks_per_slot(spark, tmp_path: Path, monkeypatch) -> None:
    """Eight bins on local[2]: one job, its write 4 tasks (two per slot; a task writes two bins' files),
    each bin still one file, rows exactly once; no per-bin read (the union path) is built."""
    t = tmp_path / "t"
    n = make_table(t, partitions=8, appends=3)
    plan = plan_for(t, engine="spark", method="rewrite")
    assert sum(len(a.bins) for a in plan.tables[0].actions) == 8
    per_bin = []
    monkeypatch.setattr(SparkEngine, "_bin_frame", lambda self, job, s: per_bin.append(job) or None)
    tracker = spark.sparkContext.statusTracker()
    before = set(tracker.getJobIdsForGroup())
    run = apply_plan(plan, target=Target(engine="spark"), engine=SparkEngine(Target(engine="spark")), watch_s=0)
    assert run.ok, [r.error for r in run.results]
    (job,) = set(tracker.getJobIdsForGroup()) - before
    assert _write_tasks(spark, job) == 2 * spark.sparkContext.defaultParallelism == 4
    assert not per_bin and len(DeltaTable(str(t)).file_uris()) == 8
    exactly_once(t, n)


def _same_names(path: Path) -> int:
    """Two partitions whose files have the same names (as a writer naming files by a counter leaves them):
    rows 0.. unique. Returns the row count."""
    write_deltalake(str(path), pa.table({"date": pa.array([], pa.string()), "id": pa.array([], pa.int64())}),
                    partition_by=["date"])
    actions, n = [], 0
    for part in ("2024-01-01", "2024-01-02"):
        (path / f"date={part}").mkdir()
        for i in range(3):
            rel = f"date={part}/part-{i:05d}.parquet"
            pq.write_table(pa.table({"id": pa.array(range(n, n + 10), pa.int64())}), path / rel)
            actions.append(AddAction(rel, (path / rel).stat().st_size, {"date": part}, 1_700_000_000_000, True,
                                     json.dumps({"numRecords": 10})))
            n += 10
    dt = DeltaTable(str(path))
    dt.create_write_transaction(actions, mode="append", schema=dt.schema(), partition_by=["date"])
    return n


def test_repeated_file_names_in_a_group_take_the_union_of_per_bin_reads(spark, tmp_path: Path) -> None:
    """A file name that two bins share cannot say which bin a row is from: the group is a union of one read
    per bin, still one job; rows exactly once."""
    t = tmp_path / "t"
    n = _same_names(t)
    plan = plan_for(t, engine="spark", method="rewrite")
    assert sum(len(a.bins) for a in plan.tables[0].actions) == 2
    before = _jobs(spark)
    run = apply_plan(plan, target=Target(engine="spark"), engine=SparkEngine(Target(engine="spark")), watch_s=0)
    assert run.ok, [r.error for r in run.results]
    assert _jobs(spark) - before == 1 and len(DeltaTable(str(t)).file_uris()) == 2
    exactly_once(t, n)


def test_rows_of_a_file_no_bin_names_fail_the_group_and_nothing_is_committed(spark, tmp_path: Path,
                                                                             monkeypatch) -> None:
    """If Spark named a file otherwise than compactor does, its rows would belong to no bin: the group fails
    with one clear error and commits nothing (the table keeps its files and rows)."""
    from compactor.engines import spark as spark_engine

    t = tmp_path / "t"
    n = make_table(t, partitions=2, appends=3)
    files = sorted(DeltaTable(str(t)).file_uris())
    one = spark_engine.file_name(files[0])
    monkeypatch.setattr(spark_engine, "file_name", lambda loc: "renamed-" + one if loc.endswith(one) else
                        loc.rsplit("/", 1)[-1])
    plan = plan_for(t, engine="spark", method="rewrite")
    run = apply_plan(plan, target=Target(engine="spark"), engine=SparkEngine(Target(engine="spark")), watch_s=0)
    assert not run.ok
    (error,) = {r.error for r in run.results if r.error}
    assert "rows of no bin" in error and "nothing was committed" in error, error
    assert sorted(DeltaTable(str(t)).file_uris()) == files
    exactly_once(t, n)


def test_a_group_of_more_files_than_the_name_map_takes_takes_the_union(spark, tmp_path: Path, monkeypatch) -> None:
    """Spark compares a row's file name with each name of the map in turn: past MAP_NAMES_MAX files a group
    is the union of per-bin reads (still one job, rows exactly once)."""
    from compactor.engines import spark as spark_engine

    t = tmp_path / "t"
    n = make_table(t, partitions=4, appends=3)
    plan = plan_for(t, engine="spark", method="rewrite")
    monkeypatch.setattr(spark_engine, "MAP_NAMES_MAX", 11)  # the group has 12 files
    per_bin = []
    real = SparkEngine._bin_frame
    monkeypatch.setattr(SparkEngine, "_bin_frame", lambda self, job, s: per_bin.append(job) or real(self, job, s))
    before = _jobs(spark)
    run = apply_plan(plan, target=Target(engine="spark"), engine=SparkEngine(Target(engine="spark")), watch_s=0)
    assert run.ok, [r.error for r in run.results]
    assert len(per_bin) == 4 and _jobs(spark) - before == 1
    exactly_once(t, n)


def test_the_name_map_reads_back_every_name_and_is_folded_to_a_constant(spark) -> None:
    """File names with quotes, backslashes, commas, colons, braces and non-ASCII letters map to their bins
    exactly; the optimized plan holds the map as a literal (from_json is evaluated once, not per row)."""
    from compactor.engines.spark import bin_map

    names = [["part-0.parquet", "it's \"odd\".parquet"], ["back\\slash,comma:colon{}.parquet", "été.parquet"]]
    frame = spark.range(1).selectExpr(f"{bin_map(names)} AS m")
    assert frame.collect()[0].m == {n: i for i, ns in enumerate(names) for n in ns}
    optimized = frame._jdf.queryExecution().optimizedPlan().toString().lower()
    assert "from_json" not in optimized and "jsontostructs" not in optimized, optimized


def test_a_group_with_a_file_that_predates_a_rename_fails_and_leaves_no_staging(spark, tmp_path: Path) -> None:
    """The group's footers are read while Spark writes: a file holding `id` where the table says
    `user_id` still fails the group (nothing is returned to commit), and what Spark wrote is deleted."""
    from compactor.engines.base import BinJob, inputs_at
    from compactor.errors import VerificationError

    def write(name: str, column: str) -> str:
        pq.write_table(pa.table({column: pa.array([1, 2], pa.int64())}), tmp_path / name)
        return str(tmp_path / name)

    stage = tmp_path / "_compactor_staging_x"
    jobs = [BinJob(inputs_at(write("a.parquet", "user_id"), write("b.parquet", "user_id")), str(tmp_path / "out0.parquet"),
                   str(stage)),
            BinJob(inputs_at(write("c.parquet", "id"), write("d.parquet", "user_id")), str(tmp_path / "out1.parquet"),
                   str(tmp_path / "_compactor_staging_y"))]
    before = _jobs(spark)
    with pytest.raises(VerificationError, match="holds column.s. id .* lacks user_id"):
        SparkEngine(Target(engine="spark")).rewrite(jobs, pa.schema([("user_id", pa.int64())]))
    assert _jobs(spark) - before == 1  # Spark wrote the group (the footers were read beside it)
    assert not stage.exists() and not (tmp_path / "out0.parquet").exists() and not (tmp_path / "out1.parquet").exists()
