"""delta-spark-written tables with deletion vectors after DELETE, UPDATE and MERGE, with and without column
mapping (a renamed column and a name with spaces), partitioned by int and by date, compacted by the local
engine (no Spark in the rewrite or the commit): delta-spark reads the same multiset of rows afterwards, the
change data feed shows no row from the compaction, no rewritten file stays live, the removes carry the
deletion vectors as their adds had them, and a second plan has nothing to compact."""

from __future__ import annotations

import json
from collections import Counter
from pathlib import Path
from typing import Any

import pytest

from compactor.project.model import Project, Target
from compactor.tasks.apply import apply_plan
from tests.apply.helpers import plan_for
from tests.spark_tables import commit_actions, live_adds

pytestmark = [pytest.mark.spark, pytest.mark.delta_jars]


def _rows(spark: Any, path: str) -> Counter[Any]:
    return Counter(tuple(r) for r in spark.read.format("delta").load(path).collect())


def _build(spark: Any, path: str, partition: str, mapped: bool) -> None:
    """Appends, then a DELETE, an UPDATE and a MERGE that each leave deletion vectors."""
    part = "CAST(id % 3 AS INT) AS part" if partition == "int" else \
        "date_add(DATE'2024-01-01', CAST(id % 3 AS INT)) AS part"
    kind = "INT" if partition == "int" else "DATE"
    props = {"delta.enableDeletionVectors": "true", "delta.enableChangeDataFeed": "true"}
    if mapped:
        props["delta.columnMapping.mode"] = "name"
    price = "`unit price`" if mapped else "price"
    spark.sql(f"CREATE TABLE delta.`{path}` (id BIGINT, part {kind}, amount DOUBLE, {price} DOUBLE) USING delta "
              f"PARTITIONED BY (part) TBLPROPERTIES ("
              + ", ".join(f"'{k}' = '{v}'" for k, v in props.items()) + ")")
    for i in range(3):
        (spark.range(i * 300, (i + 1) * 300).selectExpr("id", part, "CAST(id AS DOUBLE) AS amount",
                                                         f"CAST(id % 7 AS DOUBLE) AS {price}")
         .repartition(3).write.format("delta").mode("append").save(path))
    if mapped:
        spark.sql(f"ALTER TABLE delta.`{path}` RENAME COLUMN amount TO total")
    amount = "total" if mapped else "amount"
    spark.sql(f"DELETE FROM delta.`{path}` WHERE id % 10 = 0")
    spark.sql(f"UPDATE delta.`{path}` SET {amount} = -1 WHERE id % 10 = 1")
    spark.range(0, 900, 5).selectExpr("id", f"CAST(id * 2 AS DOUBLE) AS {amount}").createOrReplaceTempView("src")
    spark.sql(f"MERGE INTO delta.`{path}` t USING src s ON t.id = s.id "
              f"WHEN MATCHED AND s.id % 2 = 0 THEN DELETE WHEN MATCHED THEN UPDATE SET t.{amount} = s.{amount}")


@pytest.mark.parametrize(("partition", "mapped"), [("int", True), ("date", False), ("date", True)])
def test_local_apply_on_a_spark_written_dv_table(delta_spark, tmp_path: Path, partition: str, mapped: bool) -> None:
    path = str(tmp_path / "t")
    _build(delta_spark, path, partition, mapped)
    before = _rows(delta_spark, path)
    with_dv = {a["path"]: a["deletionVector"] for a in live_adds(path) if a.get("deletionVector")}
    assert with_dv, "the history left no deletion vector"
    version = delta_spark.sql(f"DESCRIBE HISTORY delta.`{path}` LIMIT 1").collect()[0]["version"]
    plan = plan_for(Path(path), target_size=2**20)
    actions = [a for a in plan.tables[0].actions if a.type == "compact"]
    assert actions, plan.tables[0].skipped
    run = apply_plan(plan, target=Target(), project=Project(name="p", root=tmp_path))
    assert run.ok and all(r.status == "success" for r in run.results), [r.error for r in run.results]
    assert all(r.rows_before == r.rows_after for r in run.results)
    assert _rows(delta_spark, path) == before
    rewritten = {p for a in actions for p in a.input_paths}
    assert rewritten & set(with_dv)
    live = {a["path"] for a in live_adds(path)}
    assert not rewritten & live
    after = delta_spark.sql(f"DESCRIBE HISTORY delta.`{path}` LIMIT 1").collect()[0]["version"]
    removes = {r["remove"]["path"]: r["remove"] for v in range(version + 1, after + 1)
               for r in commit_actions(path, v) if "remove" in r}
    assert set(removes) == rewritten
    assert all(removes[p].get("deletionVector") == with_dv.get(p) for p in removes)
    changes = (delta_spark.read.format("delta").option("readChangeFeed", "true")
               .option("startingVersion", version + 1).load(path))
    assert changes.count() == 0, "the compaction shows in the change data feed"
    assert not [a for a in plan_for(Path(path), target_size=2**20).tables[0].actions if a.type == "compact"]
    # the table goes on: delta-spark deletes from the compacted files
    delta_spark.sql(f"DELETE FROM delta.`{path}` WHERE id % 10 = 3")
    assert sum(_rows(delta_spark, path).values()) == sum(n for r, n in before.items() if r[0] % 10 != 3)
    assert json.dumps(run.results[0].partition)  # partitions named as the plan names them


@pytest.mark.parametrize("when", ["before the apply", "while the bins are rewritten"])
def test_a_delete_racing_the_local_rewrite_leaves_every_row_as_the_delete_left_it(
        delta_spark, tmp_path: Path, when: str) -> None:
    """A DELETE that gives planned files new deletion vectors (delta-spark removes each with its old vector
    and adds it with the new one): before the apply, the apply compacts with the new vectors; once the apply
    has read them (crash point ``delta.journal_written``, before the rewrite), that partition is stale and
    nothing of it commits. Either way every row is exactly as the DELETE left it."""
    from compactor.runtime import faults

    path = str(tmp_path / "t")
    _build(delta_spark, path, "int", False)
    plan = plan_for(Path(path), target_size=2**20)
    planned = {p for a in plan.tables[0].actions if a.partition["part"] == "1" for p in a.input_paths}
    assert planned
    delete = f"DELETE FROM delta.`{path}` WHERE part = 1 AND id % 10 = 7"
    expected = Counter({r: n for r, n in _rows(delta_spark, path).items() if not (r[1] == 1 and r[0] % 10 == 7)})
    fired: list[str] = []

    def hook(name: str) -> None:
        if name == "delta.journal_written" and not fired:
            fired.append(name)
            delta_spark.sql(delete)

    if when == "before the apply":
        delta_spark.sql(delete)
        previous = faults.set_hook(None)
    else:
        previous = faults.set_hook(hook)
    try:
        run = apply_plan(plan, target=Target(), project=Project(name="p", root=tmp_path))
    finally:
        faults.set_hook(previous)
    status = {r.partition["part"]: r.status for r in run.results}
    version = delta_spark.sql(f"DESCRIBE HISTORY delta.`{path}`").where("operation = 'DELETE'").collect()[0]["version"]
    touched = {r["remove"]["path"] for r in commit_actions(path, version) if "remove" in r}
    assert touched & planned, "the DELETE touched no planned file"
    if when == "before the apply":
        assert set(status.values()) == {"success"}, status
    else:
        assert fired and status.pop("1") == "stale" and set(status.values()) == {"success"}, (fired, status)
    assert _rows(delta_spark, path) == expected
