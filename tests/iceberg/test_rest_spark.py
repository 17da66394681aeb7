"""The spark engine on a table of a real Iceberg REST catalog (Iceberg's reference server on loopback:
tests/iceberg/rest_server.py), end to end through the CLI in the tests' shared session: Spark writes the
table through the catalog (``type=rest``: small files in three partitions, position deletes of a
merge-on-read DELETE), compactor opens it through the same server (pyiceberg to plan, Iceberg's Java
REST catalog to rewrite and commit), replaces exactly the planned files in ``replace`` snapshots, a file
Spark appends after planning is untouched, Spark and pyiceberg read the same multiset of rows, and the next
plan plans nothing. A DELETE through the catalog while the bins are rewritten makes that partition's
action stale: nothing is committed for it and no file Spark wrote is left."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

pytest.importorskip("pyiceberg", reason="pyiceberg is not installed (pip install 'compactor[iceberg]')")

from pyiceberg.table import Table  # noqa: E402

from compactor.formats.iceberg.state import state_of  # noqa: E402
from compactor.runtime import faults  # noqa: E402
from compactor.runtime.iceberg_catalog import RestCatalogSettings, load_table, open_catalog  # noqa: E402
from tests.iceberg.project import Project, policy, rest_profiles  # noqa: E402
from tests.iceberg.rest_server import RestServer  # noqa: E402
from tests.iceberg.spark_tables import register_rest_catalog  # noqa: E402
from tests.iceberg.tables import leftovers, operations_since  # noqa: E402

pytestmark = [pytest.mark.spark, pytest.mark.iceberg_jars, pytest.mark.delta_jars]

ROWS = """SELECT id, CAST(id % 3 AS INT) AS grp, concat('s', CAST(id % 7 AS STRING)) AS s,
  CASE WHEN id % 5 = 0 THEN NULL ELSE CAST(id AS DECIMAL(12, 2)) / 8 END AS amount,
  timestamp_seconds(1704067200 + id * 3600) AS ts FROM range({lo}, {hi})"""


def _make(spark: Any, server: RestServer, table: str) -> tuple[str, str]:
    """A v2 merge-on-read table ``table`` written by Spark through the REST catalog: four inserts into three
    partitions, then a DELETE (position deletes). Returns the session's catalog name and the table's name."""
    cat = register_rest_catalog(spark, server.uri)
    t = f"{cat}.db.{table}"
    spark.sql(f"""CREATE TABLE {t} (id BIGINT, grp INT, s STRING, amount DECIMAL(12, 2), ts TIMESTAMP) USING iceberg
                  PARTITIONED BY (grp) TBLPROPERTIES ('format-version' = '2', 'write.delete.mode' = 'merge-on-read')""")
    for i in range(4):
        spark.sql(f"INSERT INTO {t} " + ROWS.format(lo=i * 30, hi=i * 30 + 30))
    spark.sql(f"DELETE FROM {t} WHERE id % 11 = 0")
    return cat, t


def _spark_rows(spark: Any, t: str, snapshot: int | None = None) -> list[tuple[Any, ...]]:
    at = f" VERSION AS OF {snapshot}" if snapshot is not None else ""
    return sorted((tuple(r) for r in spark.sql(f"SELECT id, grp, s, amount, ts FROM {t}{at}").collect()), key=repr)


def _pyiceberg_rows(table: Table) -> list[tuple[Any, ...]]:
    data = table.scan(selected_fields=("id", "grp", "s", "amount")).to_arrow().to_pylist()
    return sorted((tuple(r.values()) for r in data), key=repr)


def _table(server: RestServer, cat: str, name: str) -> Table:
    """The table as a new pyiceberg client of the server loads it."""
    settings = RestCatalogSettings(cat, server.uri)
    return load_table(open_catalog(settings), settings, f"db.{name}")


#: an OAuth2 client credential: the server issues a token for it (to pyiceberg and to Iceberg's Java client)
CREDENTIAL = "compactor:rest-secret-4f1c"


def _project(tmp_path: Path, server: RestServer, cat: str, name: str) -> Project:
    return Project.make(tmp_path, name, catalog=cat, policy_text=policy(name, cat),
                        profiles_text=rest_profiles(server.uri, engine="spark", catalog=cat, credential=CREDENTIAL,
                                                    warehouse=server.warehouse))


def test_spark_engine_through_the_rest_catalog_replaces_exactly_the_planned_files_and_converges(
        iceberg_spark: Any, rest_catalog: RestServer, tmp_path: Path) -> None:
    spark, name = iceberg_spark, "spark_converges"
    cat, t = _make(spark, rest_catalog, name)
    planned = state_of(_table(rest_catalog, cat, name), f"db.{name}")
    assert planned.delete_files, "the table has position deletes (merge-on-read)"
    at_plan = _spark_rows(spark, t)
    project = _project(tmp_path, rest_catalog, cat, name)

    r = project.cli("plan")
    assert r.exit_code == 0, r.output
    bins = project.bins()
    assert len(bins) == 3, project.table_plan()  # one per partition, with the files the deletes apply to
    planned_paths = {p for b in bins for p in b}
    assert planned_paths == {f.path for f in planned.files}

    # after planning, Spark appends one file into a partition of its own (a single file: nothing to plan)
    spark.sql(f"INSERT INTO {t} " + ROWS.format(lo=1000, hi=1010).replace("CAST(id % 3 AS INT)", "7"))
    appended = {f.path for f in state_of(_table(rest_catalog, cat, name), f"db.{name}").files} - planned_paths
    assert len(appended) == 1
    before = _spark_rows(spark, t)

    start = rest_catalog.mark()
    r = project.cli("apply", str(project.plan_file))
    assert r.exit_code == 0, r.output
    assert {x["status"] for x in project.results()} == {"success"}, project.results()
    # every request of the apply (pyiceberg's and Iceberg's Java client's, the commits among them) carried
    # the token the server issued for compactor's credential
    calls = [q for q in rest_catalog.since(start) if q.path != "/v1/oauth/tokens"]
    assert any(q.method == "POST" and q.path == f"/v1/namespaces/db/tables/{name}" for q in calls), calls
    assert all(q.bearer and "sub=compactor" in q.authorization for q in calls), calls

    table = _table(rest_catalog, cat, name)
    ops = operations_since(table, planned.snapshot_id)
    assert ops[0] == "append" and set(ops[1:]) == {"replace"}, ops
    after = {f.path for f in state_of(table, f"db.{name}").files}
    assert planned_paths - after == planned_paths  # exactly the planned files removed
    assert appended <= after  # the file appended after planning untouched
    added = after - appended - planned_paths
    assert len(added) == len(bins) and all("/data/compactor-" in p for p in added)
    assert _spark_rows(spark, t) == before  # Spark and pyiceberg read the same multiset
    assert _pyiceberg_rows(table) == sorted((r[:4] for r in before), key=repr)
    assert _spark_rows(spark, t, planned.snapshot_id) == at_plan  # time travel: the old rows
    assert not state_of(table, f"db.{name}").delete_files  # the deletes went with the files they applied to
    assert leftovers(table) == []

    r = project.cli("plan", "--detailed-exitcode")
    assert r.exit_code == 0, r.output
    assert project.table_plan()["actions"] == []
    written = [p for p in (tmp_path / "proj" / "target").rglob("*") if p.is_file()]
    assert not [p for p in written if CREDENTIAL.split(":")[1] in p.read_text(errors="replace")]


def test_a_delete_through_the_rest_catalog_while_rewriting_makes_that_action_stale(
        iceberg_spark: Any, rest_catalog: RestServer, tmp_path: Path) -> None:
    """A DELETE of a row of grp 1 lands after the bins' outputs are written and before the commit: the
    commit of grp 1's action is refused and its output deleted; the other partitions' actions commit."""
    spark, name = iceberg_spark, "spark_stale"
    cat, t = _make(spark, rest_catalog, name)
    project = _project(tmp_path, rest_catalog, cat, name)
    r = project.cli("plan")
    assert r.exit_code == 0, r.output
    delete = f"DELETE FROM {t} WHERE id = 1"
    expected = [row for row in _spark_rows(spark, t) if row[0] != 1]

    def race(point: str) -> None:
        if point == "iceberg.outputs_written":
            spark.sql(delete)

    previous = faults.set_hook(race)
    try:
        r = project.cli("apply", str(project.plan_file))
    finally:
        faults.set_hook(previous)
    assert r.exit_code == 0, r.output  # a stale action is no failure: the next plan takes the table as it is
    statuses = {x["partition"]["grp"]: x["status"] for x in project.results()}
    assert statuses == {"0": "success", "1": "stale", "2": "success"}, statuses
    table = _table(rest_catalog, cat, name)
    assert _spark_rows(spark, t) == expected
    assert leftovers(table) == []

