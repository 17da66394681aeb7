"""delta-spark-written tables with deletion vectors after DELETE, UPDATE and MERGE (1%, 10% and 90% of the rows
soft-deleted), with and without column mapping (name mode with a renamed column and a name with spaces, id mode
once), partitioned by int and by date, compacted by compactor's own rewrite on each engine: the local engine
(no Spark in the rewrite or the commit) and the spark engine with ``compaction.method: rewrite`` (Spark reads
each bin less the rows the vectors delete and writes the physical schema with its field ids; compactor
commits). delta-spark reads the same multiset of rows afterwards, the change data feed shows no row from the
compaction, no rewritten file stays live and no file the compaction added has a deletion vector, the removes
carry the deletion vectors as their adds had them, and a second plan has nothing to compact. A DELETE racing
the rewrite leaves every row as the DELETE left it."""

from __future__ import annotations

import json
from collections import Counter
from pathlib import Path
from typing import Any
from urllib.parse import unquote

import pyarrow.parquet as pq
import pytest
from deltalake import DeltaTable

from compactor.engines.spark import SparkEngine
from compactor.models.results import RunResults
from compactor.planning.plan import Plan
from compactor.project.model import Project, Target
from compactor.tasks.apply import apply_plan
from tests.apply.helpers import plan_for
from tests.spark_tables import commit_actions, live_adds

pytestmark = [pytest.mark.spark, pytest.mark.delta_jars]

#: the rows a DELETE soft-deletes, by share: ids whose last two digits are below the bound
DELETED_BELOW = {"1%": 1, "10%": 10, "90%": 90}


def _rows(spark: Any, path: str) -> Counter[Any]:
    return Counter(tuple(r) for r in spark.read.format("delta").load(path).collect())


def _build(spark: Any, path: str, partition: str, mapping: str, share: str = "10%") -> None:
    """Appends, then a DELETE of ``share`` of the rows, an UPDATE and a MERGE (deleting another 1%) that each
    leave deletion vectors. ``mapping``: none, name or id (a renamed column and a name with spaces)."""
    part = "CAST(id % 3 AS INT) AS part" if partition == "int" else \
        "date_add(DATE'2024-01-01', CAST(id % 3 AS INT)) AS part"
    kind = "INT" if partition == "int" else "DATE"
    props = {"delta.enableDeletionVectors": "true", "delta.enableChangeDataFeed": "true"}
    mapped = mapping != "none"
    if mapped:
        props["delta.columnMapping.mode"] = mapping
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
    spark.sql(f"DELETE FROM delta.`{path}` WHERE id % 100 < {DELETED_BELOW[share]}")
    spark.sql(f"UPDATE delta.`{path}` SET {amount} = -1 WHERE id % 100 = 95")
    spark.range(0, 900).where("id % 100 IN (96, 97)").selectExpr("id", f"CAST(id * 2 AS DOUBLE) AS {amount}") \
        .createOrReplaceTempView("src")
    spark.sql(f"MERGE INTO delta.`{path}` t USING src s ON t.id = s.id "
              f"WHEN MATCHED AND s.id % 100 = 96 THEN DELETE WHEN MATCHED THEN UPDATE SET t.{amount} = s.{amount}")


def _plan(path: str, engine: str) -> Plan:
    return plan_for(Path(path), engine=engine, target_size=2**20)


def _apply(plan: Plan, engine: str, root: Path) -> RunResults:
    if engine == "local":
        return apply_plan(plan, target=Target(), project=Project(name="p", root=root))
    spark = Target(engine="spark")
    return apply_plan(plan, target=spark, engine=SparkEngine(spark), project=Project(name="p", root=root))


@pytest.mark.parametrize(("engine", "partition", "mapping", "share"), [
    ("local", "int", "name", "1%"), ("local", "date", "none", "10%"), ("local", "date", "name", "90%"),
    ("spark", "int", "name", "1%"), ("spark", "date", "none", "10%"), ("spark", "date", "name", "90%"),
    ("spark", "int", "id", "10%")])
def test_apply_on_a_spark_written_dv_table(delta_spark, tmp_path: Path, engine: str, partition: str, mapping: str,
                                           share: str) -> None:
    path = str(tmp_path / "t")
    _build(delta_spark, path, partition, mapping, share)
    before = _rows(delta_spark, path)
    with_dv = {a["path"]: a["deletionVector"] for a in live_adds(path) if a.get("deletionVector")}
    assert with_dv, "the history left no deletion vector"
    version = delta_spark.sql(f"DESCRIBE HISTORY delta.`{path}` LIMIT 1").collect()[0]["version"]
    plan = _plan(path, engine)
    actions = [a for a in plan.tables[0].actions if a.type == "compact"]
    assert actions, plan.tables[0].skipped
    assert not [s for s in plan.tables[0].skipped if s.reason == "unsupported"], plan.tables[0].skipped
    run = _apply(plan, engine, tmp_path)
    assert run.ok and all(r.status == "success" for r in run.results), [r.error for r in run.results]
    assert all(r.rows_before == r.rows_after for r in run.results)
    assert _rows(delta_spark, path) == before
    rewritten = {p for a in actions for p in a.input_paths}
    assert rewritten & set(with_dv)
    live = {a["path"]: a for a in live_adds(path)}
    assert not rewritten & set(live)
    after = delta_spark.sql(f"DESCRIBE HISTORY delta.`{path}` LIMIT 1").collect()[0]["version"]
    commits = [r for v in range(version + 1, after + 1) for r in commit_actions(path, v)]
    removes = {r["remove"]["path"]: r["remove"] for r in commits if "remove" in r}
    added = {r["add"]["path"] for r in commits if "add" in r}
    assert set(removes) == rewritten and added and added <= set(live)
    assert all(removes[p].get("deletionVector") == with_dv.get(p) for p in removes)
    assert not [p for p in added if live[p].get("deletionVector")], "a file the compaction added has a vector"
    if mapping != "none":  # the outputs name each column by its physical name and carry its id
        ids = {(f["metadata"]["delta.columnMapping.physicalName"], f["metadata"]["delta.columnMapping.id"])
               for f in json.loads(DeltaTable(path).schema().to_json())["fields"]
               if f["name"] != "part"}
        for p in added:
            schema = pq.read_schema(Path(path) / unquote(p))
            assert {(f.name, int(f.metadata[b"PARQUET:field_id"])) for f in schema} == ids, (p, schema)
    changes = (delta_spark.read.format("delta").option("readChangeFeed", "true")
               .option("startingVersion", version + 1).load(path))
    assert changes.count() == 0, "the compaction shows in the change data feed"
    assert not [a for a in _plan(path, engine).tables[0].actions if a.type == "compact"]
    # the table goes on: delta-spark deletes from the compacted files
    delta_spark.sql(f"DELETE FROM delta.`{path}` WHERE id % 100 = 93")
    assert sum(_rows(delta_spark, path).values()) == sum(n for r, n in before.items() if r[0] % 100 != 93)
    assert json.dumps(run.results[0].partition)  # partitions named as the plan names them


@pytest.mark.parametrize("engine", ["local", "spark"])
@pytest.mark.parametrize("when", ["before the apply", "while the bins are rewritten", "once the outputs are written"])
def test_a_delete_racing_the_rewrite_leaves_every_row_as_the_delete_left_it(
        delta_spark, tmp_path: Path, when: str, engine: str) -> None:
    """A DELETE that gives planned files new deletion vectors (delta-spark removes each with its old vector
    and adds it with the new one): before the apply, the apply compacts with the new vectors; once the apply
    has read them (crash point ``delta.journal_written``, before the rewrite) or once it wrote its outputs
    (``delta.outputs_written``, before the commit), that partition is stale and nothing of it commits.
    Either way every row is exactly as the DELETE left it."""
    from compactor.runtime import faults

    path = str(tmp_path / "t")
    _build(delta_spark, path, "int", "none")
    plan = _plan(path, engine)
    planned = {p for a in plan.tables[0].actions if a.partition["part"] == "1" for p in a.input_paths}
    assert planned
    delete = f"DELETE FROM delta.`{path}` WHERE part = 1 AND id % 10 = 3"  # no file of only such rows
    expected = Counter({r: n for r, n in _rows(delta_spark, path).items() if not (r[1] == 1 and r[0] % 10 == 3)})
    point = {"while the bins are rewritten": "delta.journal_written",
             "once the outputs are written": "delta.outputs_written"}.get(when)
    fired: list[str] = []

    def hook(name: str) -> None:
        if name == point and not fired:
            fired.append(name)
            delta_spark.sql(delete)

    if point is None:
        delta_spark.sql(delete)
    previous = faults.set_hook(hook if point else None)
    try:
        run = _apply(plan, engine, tmp_path)
    finally:
        faults.set_hook(previous)
    status = {r.partition["part"]: r.status for r in run.results}
    version = delta_spark.sql(f"DESCRIBE HISTORY delta.`{path}`").where("operation = 'DELETE'").collect()[0]["version"]
    touched = {r["remove"]["path"] for r in commit_actions(path, version) if "remove" in r}
    assert touched & planned, "the DELETE touched no planned file"
    if point is None:
        assert set(status.values()) == {"success"}, status
    else:
        assert fired and status.pop("1") == "stale" and set(status.values()) == {"success"}, (fired, status)
    assert _rows(delta_spark, path) == expected
    assert not list(Path(path).rglob("_compactor_staging_*")), "a staging folder was left"
