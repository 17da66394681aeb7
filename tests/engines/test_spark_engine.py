"""The spark engine on real delta-rs tables with the shared local SparkSession."""

from __future__ import annotations

import datetime as dt
import json
import threading
from dataclasses import replace
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from deltalake import DeltaTable, write_deltalake

from compactor.engines.spark import SparkEngine
from compactor.engines.spark_sql import partition_predicate
from compactor.formats.delta.spark import LISTING_TASKS, LOCAL_LISTING_TASKS, listing_conf
from compactor.formats.delta.spark_sql import optimize_sql, vacuum_sql
from compactor.project.model import Target
from compactor.tasks.apply import apply_plan
from tests.apply.helpers import (
    apply_racing_the_vacuum,
    exactly_once,
    ids,
    listed_vacuum,
    make_table,
    one_action_plan,
    plan_for,
    vacuum_reviewing,
)

pytestmark = pytest.mark.spark
SPARK = Target(engine="spark")


def _events(path: Path, appends: int = 6) -> int:
    n = 0
    for _i in range(appends):
        for day in ("2024-01-01", "2024-01-02"):
            rows = 40
            write_deltalake(str(path), pa.table({
                "date": [day] * rows,
                "id": pa.array(range(n, n + rows), pa.int64()),
                "ts": pa.array([dt.datetime(2024, 1, 1) + dt.timedelta(minutes=k) for k in range(n, n + rows)],
                               pa.timestamp("us")),
                "amount": pa.array([float(k) for k in range(n, n + rows)]),
                "kind": ["a" if k % 2 else "b" for k in range(n, n + rows)],
            }), partition_by=["date"], mode="append")
            n += rows
    return n


def test_spark_rewrite_end_to_end(spark, tmp_path: Path) -> None:
    t = tmp_path / "events"
    n = _events(t)
    before_sum = sum(ids(t).elements())
    v0 = DeltaTable(str(t)).version()
    plan = plan_for(t, engine="spark")
    predicted = {a.partition["date"]: a.expected_output_files for a in plan.tables[0].actions}
    run = apply_plan(plan, target=SPARK, engine=SparkEngine(SPARK))
    assert run.ok, [r.error for r in run.results]
    exactly_once(t, n)
    assert sum(ids(t).elements()) == before_sum
    live = pa.table(DeltaTable(str(t)).get_add_actions(flatten=True))
    counts = {}
    for d in live.column("partition.date").to_pylist():
        counts[d] = counts.get(d, 0) + 1
    assert counts == predicted == {"2024-01-01": 1, "2024-01-02": 1}
    arrow_schema = pa.schema(DeltaTable(str(t)).schema().to_arrow())
    for v in range(v0 + 1, DeltaTable(str(t)).version() + 1):
        lines = [json.loads(x) for x in (t / "_delta_log" / f"{v:020d}.json").read_text().splitlines()]
        info = next(x["commitInfo"] for x in lines if "commitInfo" in x)
        assert info["compactor.run_id"] == run.run_id
        for x in lines:
            for kind in ("add", "remove"):
                if kind in x:
                    assert x[kind]["dataChange"] is False
            if "add" in x:
                add = x["add"]
                stats = json.loads(add["stats"])
                assert stats["numRecords"] == 240 and stats["nullCount"]["id"] == 0
                assert stats["minValues"]["ts"].endswith("Z") and "amount" in stats["maxValues"]
                assert add["partitionValues"] == {"date": add["path"].split("/")[0].split("=")[1]}
                f = pq.ParquetFile(t / add["path"])
                assert "date" not in f.schema_arrow.names  # no partition columns inside files
                assert f.schema_arrow.field("ts").type == pa.timestamp("us")  # TIMESTAMP_MICROS, not INT96
                assert all(f.metadata.schema.column(i).physical_type != "INT96" for i in range(f.metadata.num_columns))
                assert [x.name for x in f.schema_arrow] == [x.name for x in arrow_schema if x.name != "date"]
    assert not list(t.rglob("_compactor_staging*")) and not list((t / "_compactor" / "rewrites").glob("*"))
    # Spark reads the table by its exact file list
    assert spark.read.parquet(*DeltaTable(str(t)).file_uris()).count() == n


def test_concurrent_appender_during_spark_apply(spark, tmp_path: Path) -> None:
    t = tmp_path / "t"
    n = make_table(t, partitions=3, appends=8)
    plan = plan_for(t, engine="spark")
    added = []
    stop = threading.Event()

    def append() -> None:
        k = n
        while not stop.is_set() and len(added) < 60:
            write_deltalake(str(t), pa.table({"date": ["2024-01-02"] * 5, "id": pa.array(range(k, k + 5), pa.int64())}),
                            partition_by=["date"], mode="append")
            added.append(k)
            k += 5

    th = threading.Thread(target=append)
    th.start()
    try:
        run = apply_plan(plan, target=SPARK, engine=SparkEngine(SPARK))
    finally:
        stop.set()
        th.join()
    assert run.ok, [r.error for r in run.results]
    exactly_once(t, n + 5 * len(added))


class _RacedSparkEngine(SparkEngine):
    """Another tool's compaction commits after this engine read the table and before it commits."""

    def rewrite(self, jobs, schema, on_done=None):
        out = super().rewrite(jobs, schema, on_done)
        DeltaTable(str(Path(jobs[0].output).parents[1])).optimize.compact()
        return out


def test_spark_guard_repairs_a_racing_compaction_or_refuses(spark, tmp_path: Path) -> None:
    t = tmp_path / "t"
    n = make_table(t, partitions=1, appends=8)
    run = apply_plan(plan_for(t, engine="spark"), target=SPARK, engine=_RacedSparkEngine(SPARK))
    (r,) = run.results
    # the re-check right before commit sees the inputs gone: nothing is committed, nothing left behind
    assert r.status == "stale", r
    exactly_once(t, n)
    assert not list(t.rglob("*-compactor.c000.snappy.parquet")) and not list(t.rglob("_compactor_staging*"))


@pytest.mark.parametrize("fixture", ["delta-rs/table-with-dv-small", "delta-golden/table-with-columnmapping-mode-name"])
def test_rewrites_dv_and_column_mapping_fixtures(spark, copy_fixture, fixture: str) -> None:
    """The spark engine's rewrite compacts a file with a deletion vector (its deleted rows left out, its
    remove carrying the vector) and a column-mapped table (physical names and field ids): delta-rs reads
    the same rows, no live file keeps a vector (tests/interop/test_local_dv_spark.py: delta-spark's view)."""
    from deltalake import QueryBuilder

    from compactor.formats import get_format
    from compactor.formats.base import ActionContext
    from compactor.formats.delta.read.state import read_delta_state
    from compactor.models.table import TableLocation
    from compactor.planning.actions import CompactAction
    from compactor.planning.plan import TablePlan

    def rows() -> list[str]:
        data = QueryBuilder().register("t", DeltaTable(str(path))).execute("select * from t").read_all()
        return sorted(repr(sorted(r.items())) for r in pa.table(data).to_pylist())

    path = copy_fixture(fixture)
    before = rows()
    state = read_delta_state(TableLocation(str(path)))
    files = state.files.column("path").to_pylist()
    v = DeltaTable(str(path)).version()
    action = CompactAction(bins=(tuple(files),), target_file_size=2**20, min_file_size=2**19, method="rewrite")
    engine = SparkEngine(SPARK)
    ctx = ActionContext(TablePlan("x", str(path), "delta", "spark", v), state, SPARK, lambda: engine,
                        commit_metadata={"compactor.action": "m"})
    outcome = get_format("delta").run(action, ctx)
    assert (outcome.files_removed, outcome.files_added) == (len(files), 1)
    assert DeltaTable(str(path)).version() == v + 1 and rows() == before
    assert not pa.table(DeltaTable(str(path)).deletion_vectors()).num_rows


def test_native_sql_is_built_as_data() -> None:
    assert partition_predicate({"date": "2024-01-01", "region": None}) == "`date` = '2024-01-01' AND `region` IS NULL"
    assert optimize_sql("/lake/t", {"date": "it's"}, ["user_id"]) == \
        "OPTIMIZE delta.`/lake/t` WHERE `date` = 'it\\'s' ZORDER BY (`user_id`)"
    assert optimize_sql("/lake/t", {}) == "OPTIMIZE delta.`/lake/t`"
    assert optimize_sql("/lake/t", [{"d": "a"}, {"d": None}]) == \
        "OPTIMIZE delta.`/lake/t` WHERE (`d` = 'a') OR (`d` IS NULL)"
    assert vacuum_sql("/lake/t", 168, True) == "VACUUM delta.`/lake/t` RETAIN 168 HOURS DRY RUN"
    assert vacuum_sql("/lake/t", 0, False, inventory="SELECT * FROM v") == \
        "VACUUM delta.`/lake/t` USING INVENTORY (SELECT * FROM v) RETAIN 0 HOURS"
    # whole hours only: delta-spark rounds a fraction to the nearest hour, a horizon it would not keep
    for bad in (168 + 2 / 3600, 0.5, -1):
        with pytest.raises(ValueError, match="whole number of hours"):
            vacuum_sql("/lake/t", bad, False)


@pytest.mark.delta_jars
def test_native_optimize_with_delta_jars(delta_spark, tmp_path: Path) -> None:
    t = tmp_path / "t"
    n = make_table(t, partitions=2, appends=6)
    plan = plan_for(t, engine="spark")
    plan = replace(plan, tables=tuple(replace(tp, actions=tuple(replace(a, method="optimize") for a in tp.actions))
                                      for tp in plan.tables))
    v0 = DeltaTable(str(t)).version()
    conf = delta_spark.conf
    conf.set("spark.databricks.delta.optimize.maxFileSize", "12345678")  # the user's own setting
    conf.unset("spark.databricks.delta.optimize.minFileSize")
    try:
        run = apply_plan(plan, target=SPARK, engine=SparkEngine(SPARK))
        # the session's settings are as they were: the user's restored, compactor's own removed
        assert conf.get("spark.databricks.delta.optimize.maxFileSize") == "12345678"
        assert conf.get("spark.databricks.delta.optimize.minFileSize", None) is None
        assert conf.get("spark.databricks.delta.commitInfo.userMetadata", None) is None
    finally:
        conf.unset("spark.databricks.delta.optimize.maxFileSize")
    assert run.ok
    exactly_once(t, n)
    # one OPTIMIZE over both partitions (a commit group), reported per partition
    assert DeltaTable(str(t)).version() == v0 + 1
    assert [(r.files_removed, r.files_added) for r in run.results] == [(6, 1), (6, 1)]
    assert {r.table_version_after for r in run.results} == {v0 + 1}
    assert " OR " in run.results[0].details.sql


def _data_files(t: Path) -> set[str]:
    """The table's data files on disk (delta-spark also writes a checkpoint into the log as it commits)."""
    return {r for p in t.rglob("*.parquet") if not (r := p.relative_to(t).as_posix()).startswith("_delta_log/")}


@pytest.mark.delta_jars
def test_vacuum_with_delta_spark_deletes_only_the_reviewed_files(delta_spark, tmp_path: Path) -> None:
    """dry_run_first through delta-spark: VACUUM DRY RUN first, nothing deleted when it lists a file the
    plan did not; else the VACUUM, its retention grown by the time since the listing (a fractional number
    of hours), deletes exactly the listed files."""
    t = tmp_path / "t"
    n = make_table(t, partitions=1, appends=5)
    DeltaTable(str(t)).alter.set_table_properties({"delta.deletedFileRetentionDuration": "interval 0 hours"})
    DeltaTable(str(t)).optimize.compact()
    first = listed_vacuum(str(t))
    n = make_table(t, partitions=1, appends=2, start=n)
    DeltaTable(str(t)).optimize.compact()  # 3 more removed files, deletable at once, not in the plan
    before = _data_files(t)
    run = apply_plan(one_action_plan(str(t), first, engine="spark"), target=SPARK, engine=SparkEngine(SPARK))
    (r,) = run.results
    assert r.status == "error" and "VACUUM would now delete 3 file(s) the reviewed plan did not list" in r.error
    assert _data_files(t) == before
    again = listed_vacuum(str(t))
    assert again.files is not None and len(again.files) == 8
    run = apply_plan(one_action_plan(str(t), again, engine="spark"), target=SPARK, engine=SparkEngine(SPARK))
    assert delta_spark.conf.get(LISTING_TASKS, None) is None  # the session's own (unset) setting is back
    (r,) = run.results
    assert r.status == "success", r.error
    assert r.details.engine == "delta-spark" and set(r.details.files) == set(again.files)
    assert _data_files(t) == before - set(again.files)
    exactly_once(t, n)


@pytest.mark.delta_jars
def test_vacuum_lists_in_a_few_tasks_in_a_local_session_unless_the_user_says(delta_spark) -> None:
    """Delta's VACUUM lists a table in ``parallelPartitionDiscovery.parallelism`` tasks, 10,000 by default
    (41-66 s for a table of two folders on local[2]): a local session where it is unset lists in
    LOCAL_LISTING_TASKS; a user's own setting stays."""
    engine = SparkEngine(SPARK)
    assert listing_conf(engine) == {LISTING_TASKS: str(LOCAL_LISTING_TASKS)}
    delta_spark.conf.set(LISTING_TASKS, "100")
    try:
        assert listing_conf(engine) == {}
    finally:
        delta_spark.conf.unset(LISTING_TASKS)


def _append_to(t: Path, start: int, appends: int, value: str = "x y") -> int:
    """``appends`` files of 50 rows into the partition ``date=value``; ids from ``start``."""
    for _ in range(appends):
        write_deltalake(str(t), pa.table({"date": [value] * 50, "id": pa.array(range(start, start + 50), pa.int64())}),
                        partition_by=["date"], mode="append")
        start += 50
    return start


def _live_names(t: Path) -> set[str]:
    """The names of the table's live files."""
    return {Path(u).name for u in DeltaTable(str(t)).file_uris()}


@pytest.mark.delta_jars
@pytest.mark.parametrize("dry_run_first", [True, False])
def test_vacuum_with_delta_spark_takes_no_file_removed_after_its_listing(delta_spark, tmp_path: Path,
                                                                        dry_run_first: bool) -> None:
    """The delete considers only the files the dry run listed (``USING INVENTORY``): files an optimize
    removes between the listing and the delete stay, though at zero retention they are deletable at once
    (delta-spark rounds a fractional retention to whole hours, so no retention could keep them), and what
    is reported deleted is what left storage. A table root and a partition value with a space."""
    t = tmp_path / "lake 1" / "t"
    n = _append_to(t, 0, 5)
    DeltaTable(str(t)).alter.set_table_properties({"delta.deletedFileRetentionDuration": "interval 0 hours"})
    DeltaTable(str(t)).optimize.compact()
    listed = listed_vacuum(str(t))
    assert listed.files is not None and len(listed.files) == 5 and all(f.startswith("date=x") for f in listed.files)
    action = listed if dry_run_first else vacuum_reviewing(None, dry_run_first=False)
    raced: set[str] = set()

    def race() -> None:
        _append_to(t, n, 2)
        live = _live_names(t)
        DeltaTable(str(t)).optimize.compact()
        raced.update(live - _live_names(t))

    run = apply_racing_the_vacuum(one_action_plan(str(t), action, engine="spark"), race, target=SPARK,
                                  engine=SparkEngine(SPARK))
    (r,) = run.results
    assert r.status == "success", r.error
    assert len(raced) == 3 and raced <= {Path(f).name for f in _data_files(t)}  # removed after the listing: kept
    assert r.details.engine == "delta-spark" and set(r.details.files) == set(listed.files)
    assert r.files_removed == 5 and not set(listed.files) & _data_files(t)
    # every row exactly once, and no file the log names is missing (delta-rs reads each; the test
    # helper's file-by-file read takes no table root with a space)
    assert sorted(DeltaTable(str(t)).to_pyarrow_table(columns=["id"]).column("id").to_pylist()) == list(range(n + 100))
