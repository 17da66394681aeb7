"""Tables identified by catalog name resolve through Spark (spark engine only)."""

from __future__ import annotations

import datetime as dt
from dataclasses import replace
from pathlib import Path

import pytest

from compactor.policy.model import TablePolicy
from compactor.project.model import SparkSettings, Target
from compactor.tasks.plan import build_plan, read_state
from tests.apply.helpers import make_table


@pytest.mark.spark
def test_catalog_table_resolves_to_its_location(spark, tmp_path: Path) -> None:
    t = tmp_path / "orders"
    make_table(t, partitions=2, appends=6)
    spark.sql(f"CREATE TABLE IF NOT EXISTS compactor_catalog_orders USING parquet LOCATION '{t}'")
    try:
        policy = replace(TablePolicy(name="compactor_catalog_orders"))
        assert policy.is_catalog_table
        target = Target(engine="spark", spark=SparkSettings())
        state = read_state(policy, target)
        assert not isinstance(state, Exception), state
        assert Path(state.uri).resolve() == t.resolve() and state.file_count == 12
        plan = build_plan([policy], {policy.name: state}, now=dt.datetime.now(dt.UTC), target=target,
                          project_name="p")
        assert plan.tables[0].error is None
        missing = read_state(TablePolicy(name="no_such_table_xyz"), target)
        assert isinstance(missing, Exception) and "cannot resolve catalog table" in str(missing)
    finally:
        spark.sql("DROP TABLE IF EXISTS compactor_catalog_orders")


def test_catalog_table_needs_spark_engine() -> None:
    state = read_state(TablePolicy(name="sales.orders"), Target(engine="local"))
    assert isinstance(state, Exception) and "needs the spark engine" in str(state)
