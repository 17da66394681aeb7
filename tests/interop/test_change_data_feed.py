"""A delta-spark table with change data feed on, after a MERGE, compacts with default settings on both
engines (issue 36): the MERGE stored Delta's bookkeeping columns ``_change_type`` and ``__is_cdc`` in the
data file it wrote, which the table's schema does not have; the rewrite leaves them out as Delta's readers
and OPTIMIZE do, once each file's footer proves them empty. Rows and the change feed read by delta-spark
are unchanged, and the next plan has nothing left to compact (before, both bins were refused at every
apply and planned again forever)."""

from __future__ import annotations

import datetime as dt
from pathlib import Path

import pyarrow.parquet as pq
import pytest

from compactor.engines.spark import SparkEngine
from compactor.formats.delta import FORMAT
from compactor.models.table import TableLocation
from compactor.policy.model import TablePolicy
from compactor.project.model import Target
from compactor.tasks.apply import apply_plan
from compactor.tasks.plan import build_plan

pytestmark = pytest.mark.delta_jars


def _merged_table(spark, t: Path) -> None:
    spark.sql(f"CREATE TABLE delta.`{t}` (id BIGINT, date STRING, v STRING) USING delta PARTITIONED BY (date) "
              "TBLPROPERTIES ('delta.enableChangeDataFeed' = 'true')")
    for i in range(3):
        (spark.range(i * 10, i * 10 + 10).selectExpr("id", "'2024-01-01' AS date", "'a' AS v").repartition(2)
         .write.format("delta").mode("append").save(str(t)))
    spark.range(5, 25).selectExpr("id", "'2024-01-01' AS date", "'b' AS v").createOrReplaceTempView("cdf_src")
    spark.sql(f"MERGE INTO delta.`{t}` t USING cdf_src s ON t.id = s.id WHEN MATCHED THEN UPDATE SET v = s.v "
              "WHEN NOT MATCHED THEN INSERT *")
    for i in range(3):  # the MERGE left one file: small files enough for the default min_input_files (5)
        (spark.range(40 + 10 * i, 50 + 10 * i).selectExpr("id", "'2024-01-01' AS date", "'c' AS v").repartition(2)
         .write.format("delta").mode("append").save(str(t)))


def _plan(t: Path, engine: str):
    policy = TablePolicy(name="t", path=str(t))  # default settings (the spark engine's method: auto)
    state = FORMAT.read_state(TableLocation(str(t)), policy)
    return build_plan([policy], {"t": state}, now=dt.datetime.now(dt.UTC), target=Target(engine=engine),  # type: ignore[arg-type]
                      project_name="tests")


def _rows(spark, t: Path) -> list[tuple]:
    return sorted(tuple(r) for r in spark.sql(f"SELECT id, date, v FROM delta.`{t}`").collect())


def _feed(spark, t: Path) -> list[tuple]:
    return sorted(tuple(r) for r in spark.sql(
        f"SELECT id, v, _change_type, _commit_version FROM table_changes_by_path('{t}', 0)").collect())


@pytest.mark.parametrize("engine", ["local", "spark"])
def test_a_merged_change_data_feed_table_compacts_and_converges(delta_spark, tmp_path: Path, engine: str) -> None:
    t = tmp_path / "t"
    _merged_table(delta_spark, t)
    assert any("_change_type" in pq.read_schema(f).names for f in t.glob("date=*/*.parquet"))
    rows, feed = _rows(delta_spark, t), _feed(delta_spark, t)
    plan = _plan(t, engine)
    compacts = [a for a in plan.tables[0].actions if a.type == "compact"]
    assert compacts, plan.tables[0].skipped
    kwargs = {"engine": SparkEngine(Target(engine="spark"))} if engine == "spark" else {}
    run = apply_plan(plan, target=Target(engine=engine), **kwargs)  # type: ignore[arg-type]
    assert run.ok, [(r.type, r.status, r.error) for r in run.results]
    assert _rows(delta_spark, t) == rows
    assert _feed(delta_spark, t) == feed  # the compaction's commit adds nothing to the change feed
    assert not [a for a in _plan(t, engine).tables[0].actions if a.type == "compact"]
