"""The spark engine purges soft-deleted rows with delta-spark's REORG TABLE ... APPLY (PURGE), on tables
delta-spark wrote with deletion vectors and changed with DELETE, UPDATE and MERGE: a partition 80% dead is
purged though its files are all large, one 1% dead is not (ratio 0.05); delta-spark reads the same rows
afterwards, no purged file keeps a deletion vector, the change feed shows nothing of the purge, the session's
settings are as they were, and a second plan has nothing left to purge."""

from __future__ import annotations

import datetime as dt
import json
from pathlib import Path
from typing import Any

import pytest

from compactor.engines.spark import SparkEngine
from compactor.formats.delta import FORMAT
from compactor.formats.delta.plan.purge_action import PurgeAction, PurgeSkipReason
from compactor.models.table import TableLocation
from compactor.planning.plan import Plan
from compactor.policy.model import Compaction, Purge, TablePolicy, Triggers
from compactor.project.model import Target
from compactor.tasks.apply import apply_plan
from compactor.tasks.plan import build_plan
from tests.spark_tables import live_adds

SPARK = Target(engine="spark")
RATIO_KEY = "spark.databricks.delta.optimize.maxDeletedRowsRatio"


def _dv_table(spark: Any, p: str) -> None:
    """bucket 0 (even ids): 1000 rows in 2 files, then DELETE, UPDATE and MERGE leave 80% of them
    soft-deleted in those files (the UPDATE writes its 200 rows anew); bucket 1 (odd ids): 1000 rows, 1%
    deleted."""
    spark.sql(f"CREATE TABLE delta.`{p}` (id BIGINT, bucket INT, v STRING) USING delta PARTITIONED BY (bucket) "
              "TBLPROPERTIES ('delta.enableDeletionVectors' = 'true', 'delta.enableChangeDataFeed' = 'true')")
    (spark.range(0, 2000).selectExpr("id", "CAST(id % 2 AS INT) AS bucket", "CAST(id AS STRING) AS v")
     .repartition(2).write.format("delta").mode("append").save(p))
    spark.sql(f"DELETE FROM delta.`{p}` WHERE bucket = 0 AND id % 10 IN (0, 2)")  # 40% of bucket 0
    spark.sql(f"UPDATE delta.`{p}` SET v = 'u' WHERE bucket = 0 AND id % 10 = 4")  # 20%, rewritten elsewhere
    spark.range(0, 2000).selectExpr("id", "CAST(id % 2 AS INT) AS bucket").createOrReplaceTempView("src")
    spark.sql(f"MERGE INTO delta.`{p}` t USING (SELECT * FROM src WHERE bucket = 0 AND id % 10 = 6) s "
              "ON t.id = s.id WHEN MATCHED THEN DELETE")  # 20% more
    spark.sql(f"DELETE FROM delta.`{p}` WHERE bucket = 1 AND id % 200 = 1")  # 10 rows: 1% of bucket 1


def _plan(path: Path) -> Plan:
    policy = TablePolicy(name="t", path=str(path), compaction=Compaction(
        target_file_size=128 * 2**20, min_file_size=1, triggers=Triggers(min_input_files=2),
        purge=Purge(enabled=True, min_deleted_ratio=0.05)))
    state = FORMAT.read_state(TableLocation(str(path)), policy)
    return build_plan([policy], {"t": state}, now=dt.datetime.now(dt.UTC), target=SPARK, project_name="tests")


def _rows(spark: Any, p: str) -> list[tuple[Any, ...]]:
    return sorted(tuple(r) for r in spark.read.format("delta").load(p).collect())


@pytest.mark.delta_jars
def test_reorg_purges_the_partition_over_the_threshold(delta_spark: Any, tmp_path: Path) -> None:
    t = tmp_path / "t"
    p = str(t)
    _dv_table(delta_spark, p)
    before = _rows(delta_spark, p)
    v0 = max(int(f.name[:20]) for f in (t / "_delta_log").glob("*.json"))
    plan = _plan(t)
    (tp,) = plan.tables
    purges = [a for a in tp.actions if isinstance(a, PurgeAction)]
    assert [a.partition for a in purges] == [{"bucket": "0"}]
    (purge,) = purges
    live_adds_before = live_adds(t)
    dv_files = {a["path"] for a in live_adds_before if a.get("deletionVector") and "bucket=0" in a["path"]}
    # delta-spark's UPDATE on a table with the change feed wrote its 200 rows into files that also hold
    # `_change_type` and `__is_cdc`, columns the table does not have: REORG purges those files too
    # (DeltaPurgeOperation: files with dropped columns), so the plan lists them, saying why
    extra = {a["path"] for a in live_adds_before if "bucket=0" in a["path"] and not a.get("deletionVector")}
    assert len(extra) == 2 and set(purge.input_paths) == dv_files | extra
    assert {p for p, c in zip(purge.input_paths, purge.extra_columns) if c == "_change_type, __is_cdc"} == extra
    assert purge.deleted_rows == 800 and purge.partition_rows == 1200
    below = [s for s in tp.skipped if s.reason == PurgeSkipReason.BELOW_PURGE_THRESHOLD]
    assert [(s.partition, s.details["deleted_rows"]) for s in below] == [({"bucket": "1"}, 10)]
    assert not [a for a in tp.actions if not isinstance(a, PurgeAction)]  # every file is large: no compaction

    delta_spark.conf.set(RATIO_KEY, "0.5")  # the user's own setting survives the run
    try:
        run = apply_plan(plan, target=SPARK, engine=SparkEngine(SPARK), watch_s=0)
        assert delta_spark.conf.get(RATIO_KEY) == "0.5"
    finally:
        delta_spark.conf.unset(RATIO_KEY)
    assert run.ok, [(r.status, r.error) for r in run.results]
    (result,) = run.results
    assert not result.details.note  # REORG rewrote exactly the planned files
    assert purge.rows == 400 and result.rows_before == result.rows_after == 200 + sum(
        json.loads(a["stats"])["numRecords"] for a in live_adds_before if a["path"] in extra)
    assert (result.files_removed, result.files_added) == (purge.input_files, purge.expected_output_files)
    assert _rows(delta_spark, p) == before
    live = live_adds(t)
    assert not [a for a in live if a.get("deletionVector") and "bucket=0" in a["path"]]
    assert len([a for a in live if a.get("deletionVector") and "bucket=1" in a["path"]]) >= 1  # left alone
    changes = delta_spark.read.format("delta").option("readChangeFeed", "true").option(
        "startingVersion", v0 + 1).load(p)
    assert changes.count() == 0  # the purge changed no row

    again = _plan(t)
    (tp2,) = again.tables
    assert not tp2.actions
    assert [s.partition for s in tp2.skipped if s.reason == PurgeSkipReason.BELOW_PURGE_THRESHOLD] == [{"bucket": "1"}]


@pytest.mark.delta_jars
def test_a_delete_after_planning_makes_the_purge_stale(delta_spark: Any, tmp_path: Path) -> None:
    """A DELETE of more rows of a planned file keeps its path live but changes its deletion vector: the
    purge is stale, REORG never runs, every row stays as the DELETE left it."""
    t = tmp_path / "t"
    p = str(t)
    _dv_table(delta_spark, p)
    plan = _plan(t)
    delta_spark.sql(f"DELETE FROM delta.`{p}` WHERE bucket = 0 AND id % 20 = 8")  # half the rows left in them
    after_delete = _rows(delta_spark, p)
    versions = sorted(int(f.name[:20]) for f in (t / "_delta_log").glob("*.json"))
    run = apply_plan(plan, target=SPARK, engine=SparkEngine(SPARK), watch_s=0)
    assert [r.status for r in run.results] == ["stale"], [(r.status, r.error) for r in run.results]
    assert "different deletion vector" in (run.results[0].error or "")
    assert sorted(int(f.name[:20]) for f in (t / "_delta_log").glob("*.json")) == versions
    assert _rows(delta_spark, p) == after_delete
