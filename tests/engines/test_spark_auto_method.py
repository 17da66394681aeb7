"""The spark engine's default method, ``auto``: compactor's own rewrite (Spark writes the planned bins,
delta-rs commits after compactor's checks; the faster path in bench/spark_scale.py), and delta-spark's
OPTIMIZE only where nothing else can do the job: input files with deletion vectors, features delta-rs
cannot commit, z-order."""

from __future__ import annotations

import json
from dataclasses import replace
from pathlib import Path

import pytest
from deltalake import DeltaTable

from compactor.engines.spark import SparkEngine
from compactor.formats.delta import FORMAT
from compactor.formats.delta.apply.context import only_native_can
from compactor.formats.delta.read.facts import delta_facts
from compactor.models.table import TableLocation
from compactor.planning.actions import CompactAction, ZOrderAction
from compactor.project.model import Target
from compactor.tasks.apply import apply_plan
from tests.apply.helpers import exactly_once, make_table, plan_for

SPARK = Target(engine="spark")


def _operations(path: Path, after: int) -> list[tuple[str, str]]:
    """The commits after ``after``: (operation, who wrote it). compactor's rewrite and delta-spark's own
    OPTIMIZE are both recorded as OPTIMIZE; engineInfo tells them apart."""
    out = []
    for f in sorted((path / "_delta_log").glob("*.json")):
        if int(f.name[:20]) > after:
            actions = [json.loads(x) for x in f.read_text().splitlines() if x.strip()]
            info = next(a for a in actions if "commitInfo" in a)["commitInfo"]
            engine = str(info.get("engineInfo", ""))
            out.append((info.get("operation", ""), "compactor" if engine.startswith("compactor/") else
                        "delta-spark" if "Delta-Lake" in engine else engine))
    return out


def test_only_optimize_can_z_order_but_a_plain_table_is_compactors_to_rewrite(tmp_path: Path) -> None:
    make_table(tmp_path / "t", partitions=1, appends=3)
    state = FORMAT.read_state(TableLocation(str(tmp_path / "t")))
    inputs = tuple(state.paths)
    assert not only_native_can(CompactAction(bins=(inputs,), target_file_size=2**20, min_file_size=2**19), state)
    assert only_native_can(ZOrderAction(bins=(inputs,), target_file_size=2**20, min_file_size=2**19, z_order_by=("id",)), state)
    facts = delta_facts(state)
    clustered = replace(state, extra=replace(facts, protocol=replace(facts.protocol, min_writer_version=7,
                                                                     writer_features=("clustering", "domainMetadata"))))
    assert only_native_can(CompactAction(bins=(inputs,), target_file_size=2**20, min_file_size=2**19), clustered)
    # compactor's rewrite compacts column-mapped tables on either engine, but auto leaves them to OPTIMIZE
    mapped = replace(state, properties={**state.properties, "delta.columnMapping.mode": "name"})
    assert only_native_can(CompactAction(bins=(inputs,), target_file_size=2**20, min_file_size=2**19), mapped)


@pytest.mark.delta_jars
def test_auto_rewrites_a_plain_table_with_the_delta_jars_loaded(delta_spark, tmp_path: Path) -> None:
    t = tmp_path / "t"
    n = make_table(t, partitions=2, appends=6)
    v0 = DeltaTable(str(t)).version()
    plan = plan_for(t, engine="spark", method="auto")
    run = apply_plan(plan, target=SPARK, engine=SparkEngine(SPARK), watch_s=0)
    assert run.ok and {r.details.method for r in run.results} == {"rewrite"}
    assert _operations(t, v0) == [("OPTIMIZE", "compactor")]  # compactor's rewrite, one commit group
    exactly_once(t, n)


@pytest.mark.delta_jars
def test_auto_runs_optimize_on_files_with_deletion_vectors(delta_spark, tmp_path: Path) -> None:
    t = tmp_path / "dv"
    delta_spark.sql(f"CREATE TABLE delta.`{t}` (id BIGINT, p STRING) USING delta PARTITIONED BY (p) "
                    "TBLPROPERTIES ('delta.enableDeletionVectors' = 'true')")
    for i in range(4):
        delta_spark.sql(f"INSERT INTO delta.`{t}` SELECT /*+ COALESCE(1) */ id + {i * 100}, 'a' FROM range(100)")
    delta_spark.sql(f"DELETE FROM delta.`{t}` WHERE id = 5")  # a deletion vector on the first file
    v0 = DeltaTable(str(t)).version()
    plan = plan_for(t, engine="spark", method="auto")
    assert plan.tables[0].actions
    run = apply_plan(plan, target=SPARK, engine=SparkEngine(SPARK), watch_s=0)
    assert run.ok and {r.details.method for r in run.results} == {"native OPTIMIZE"}
    assert _operations(t, v0) == [("OPTIMIZE", "delta-spark")]
    assert delta_spark.sql(f"SELECT count(*) AS n, count(DISTINCT id) AS d FROM delta.`{t}`").first() == (399, 399)
