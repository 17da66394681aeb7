"""The spark engine's exact-bin rewrite of Spark-written Iceberg tables (formats/iceberg/spark_rewrite.py),
end to end through the CLI in the tests' shared session: a target whose engine is spark plans the files the
local engine leaves alone (position deletes, deletion vectors, older specs, a v3 table) and replaces
exactly the planned files, the delete files only they referenced going with them, in one ``replace``
snapshot per action; Spark and pyiceberg read the same multiset of rows afterwards, time travel to the
planned snapshot returns the old rows, the outputs lie in the action's own folder, the next plan plans
nothing. A DELETE committed after planning makes the action stale: nothing is committed and no file
Spark wrote is left behind."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

pytest.importorskip("pyiceberg", reason="pyiceberg is not installed (pip install 'compactor[iceberg]')")

from compactor.formats.iceberg.catalog import open_table  # noqa: E402
from compactor.formats.iceberg.references import referenced_paths  # noqa: E402
from compactor.formats.iceberg.state import state_of  # noqa: E402
from compactor.runtime import faults  # noqa: E402
from tests.iceberg.project import Project, policy  # noqa: E402
from tests.iceberg.spark_tables import JdbcCatalog, register_catalog  # noqa: E402

pytestmark = [pytest.mark.spark, pytest.mark.iceberg_jars, pytest.mark.delta_jars]

ROWS = """SELECT id, CAST(id % 3 AS INT) AS grp, concat('s', CAST(id % 7 AS STRING)) AS s,
  CASE WHEN id % 5 = 0 THEN NULL ELSE CAST(id AS DECIMAL(12, 2)) / 8 END AS amount,
  timestamp_seconds(1704067200 + id * 3600) AS ts, named_struct('a', id, 'b', CAST(id AS STRING)) AS nested
FROM range({lo}, {hi})"""


def _profiles(cat: JdbcCatalog) -> str:
    return (f"default:\n  target: dev\n  outputs:\n    dev:\n      engine: spark\n      catalogs:\n"
            f"        {cat.name}: {{type: sql, uri: \"{cat.uri}\", warehouse: \"{cat.warehouse}\"}}\n")


def _rows(spark: Any, table: str, snapshot: int | None = None) -> list[tuple[Any, ...]]:
    at = f" VERSION AS OF {snapshot}" if snapshot is not None else ""
    return sorted((tuple(r) for r in spark.sql(f"SELECT id, grp, s, amount, ts, nested.a FROM {table}{at}").collect()),
                  key=repr)


def _unreferenced_outputs(table: Any, pattern: str = "*") -> list[Path]:
    """The files matching ``pattern`` in the spark engine's output folders (``data/compactor-*``) that no
    snapshot of ``table`` (read again) references; Hadoop's local file system writes a checksum beside each
    file (``.<name>.crc``): a live file's stays."""
    table.refresh()
    root = Path(table.location().removeprefix("file:").removeprefix("//"))
    refs = {p.removeprefix("file:").removeprefix("//") for p in referenced_paths(table)}
    files = [p for p in root.glob(f"data/compactor-*/**/{pattern}") if p.is_file() and str(p) not in refs]
    return [p for p in files if not (p.name.startswith(".") and p.name.endswith(".crc")
                                     and str(p.with_name(p.name[1:-4])) in refs)]


def _make(spark: Any, tmp_path: Path, version: int, *, evolve: bool = False) -> tuple[JdbcCatalog, str]:
    cat = register_catalog(spark, tmp_path / "ice")
    t = f"{cat.name}.db.t"
    mode = "" if version == 1 else ", 'write.delete.mode' = 'merge-on-read', 'write.update.mode' = 'merge-on-read'"
    spark.sql(f"""CREATE TABLE {t} (id BIGINT, grp INT, s STRING, amount DECIMAL(12, 2), ts TIMESTAMP,
                  nested STRUCT<a: BIGINT, b: STRING>) USING iceberg PARTITIONED BY (grp)
                  TBLPROPERTIES ('format-version' = '{version}'{mode})""")
    for i in range(4):
        spark.sql(f"INSERT INTO {t} " + ROWS.format(lo=i * 50, hi=i * 50 + 50))
    if evolve:
        spark.sql(f"ALTER TABLE {t} ADD PARTITION FIELD days(ts)")
        for i in range(4, 6):
            spark.sql(f"INSERT INTO {t} " + ROWS.format(lo=i * 50, hi=i * 50 + 50))
    if version > 1:
        spark.sql(f"DELETE FROM {t} WHERE id % 11 = 0")
        spark.sql(f"UPDATE {t} SET s = 'updated' WHERE id % 13 = 0")
    return cat, t


def _project(tmp_path: Path, cat: JdbcCatalog) -> Project:
    return Project.make(tmp_path, "t", catalog=cat.name, policy_text=policy("t", cat.name),
                        profiles_text=_profiles(cat))


@pytest.mark.parametrize("version,evolve", [(2, False), (3, False), (2, True), (1, False)])
def test_spark_engine_replaces_exactly_the_planned_files_with_their_deletes(
        iceberg_spark: Any, tmp_path: Path, version: int, evolve: bool) -> None:
    spark = iceberg_spark
    cat, t = _make(spark, tmp_path, version, evolve=evolve)
    table = open_table(cat.settings(), "db.t")
    planned = state_of(table, "db.t")
    before = _rows(spark, t)
    lineage = sorted(spark.sql(f"SELECT id, _row_id FROM {t}").collect()) if version >= 3 else None
    if version > 1:
        assert planned.delete_files, "the table has delete files (merge-on-read)"
    project = _project(tmp_path, cat)

    r = project.cli("plan")
    assert r.exit_code == 0, r.output
    bins = project.bins()
    assert bins, project.table_plan()
    planned_paths = {p for b in bins for p in b}
    r = project.cli("apply", str(project.plan_file))
    assert r.exit_code == 0, r.output
    assert [x["status"] for x in project.results()] == ["success"] * len(project.table_plan()["actions"])

    table.refresh()
    after = state_of(table, "db.t")
    assert {f.path for f in planned.files} - {f.path for f in after.files} == planned_paths
    added = {f.path for f in after.files} - {f.path for f in planned.files}
    assert len(added) == len(bins)
    assert all("/data/compactor-" in p for p in added)
    snap = table.current_snapshot()
    assert snap is not None and snap.summary is not None and snap.summary.operation.value == "replace"
    # rows: Spark and pyiceberg read the same multiset; time travel returns the old rows
    assert _rows(spark, t) == before
    assert _rows(spark, t, planned.snapshot_id) == before
    assert table.scan().to_arrow().num_rows == len(before)
    if lineage is not None:  # v3: every row keeps its row id, as Iceberg's own rewrite keeps it
        assert sorted(spark.sql(f"SELECT id, _row_id FROM {t}").collect()) == lineage
    # no delete file stays live that only replaced files referenced
    live_data = {f.path for f in after.files}
    for d in after.delete_files:
        assert any(d.path in {x.path for x in f.deletes} for f in after.files if f.path in live_data), d.path
    r = project.cli("plan", "--detailed-exitcode")
    assert r.exit_code == 0, r.output


@pytest.mark.parametrize("when", ["before_apply", "while_rewriting"])
def test_a_delete_after_planning_makes_the_spark_rewrite_stale_and_leaves_nothing(
        iceberg_spark: Any, tmp_path: Path, when: str) -> None:
    """A DELETE of a row of grp 1 after planning (a planned file gains a delete file): committed before the
    apply, that action is not even rewritten; committed while the bins are being written (at the crash
    point after the outputs, as a racing writer would), its bin's output is written, left out of the
    commit and deleted through the gate. The other partitions' actions commit either way."""
    spark = iceberg_spark
    cat, t = _make(spark, tmp_path, 2)
    table = open_table(cat.settings(), "db.t")
    project = _project(tmp_path, cat)
    r = project.cli("plan")
    assert r.exit_code == 0, r.output
    delete = f"DELETE FROM {t} WHERE id = 1"
    if when == "before_apply":
        spark.sql(delete)
    expected = sorted((r for r in _rows(spark, t) if r[0] != 1), key=repr)

    def race(name: str) -> None:
        if name == "iceberg.outputs_written":
            spark.sql(delete)

    previous = faults.set_hook(race if when == "while_rewriting" else None)
    try:
        r = project.cli("apply", str(project.plan_file))
    finally:
        faults.set_hook(previous)
    assert r.exit_code == 0, r.output  # a stale action is no failure: the next plan takes the table as it is
    statuses = {x["partition"]["grp"]: x["status"] for x in project.results()}
    assert statuses == {"0": "success", "1": "stale", "2": "success"}, statuses
    assert _rows(spark, t) == expected
    assert _unreferenced_outputs(table) == []  # nothing Spark wrote stays unreferenced, nor its checksum


def test_a_hand_run_rewrite_data_files_after_planning_makes_the_plan_stale(iceberg_spark: Any, tmp_path: Path) -> None:
    """Another maintenance job compacts the same files first (Iceberg's own procedure): every row stays
    exactly once, compactor's actions are stale and commit nothing, and no file it wrote is left."""
    spark = iceberg_spark
    cat, t = _make(spark, tmp_path, 2)
    table = open_table(cat.settings(), "db.t")
    project = _project(tmp_path, cat)
    r = project.cli("plan")
    assert r.exit_code == 0, r.output
    spark.sql(f"CALL {cat.name}.system.rewrite_data_files(table => 'db.t', options => map('min-input-files', '2'))")
    table.refresh()
    head = table.current_snapshot()
    expected = _rows(spark, t)

    r = project.cli("apply", str(project.plan_file))
    assert r.exit_code == 0, r.output
    assert {x["status"] for x in project.results()} == {"stale"}, project.results()
    table.refresh()
    assert table.current_snapshot() == head  # nothing committed
    assert _rows(spark, t) == expected
    assert _unreferenced_outputs(table) == []


def test_spark_engine_on_orc_and_avro_files_transforms_and_schema_evolution(iceberg_spark: Any, tmp_path: Path) -> None:
    """Data files in Parquet, ORC and Avro (the table's write format changed between inserts), bucket and
    truncate transforms, and a schema evolved between writes (a column added, one renamed, one dropped, int
    widened to long, float to double): the spark engine replaces exactly the planned files and every row
    reads back the same."""
    spark = iceberg_spark
    cat = register_catalog(spark, tmp_path / "ice")
    t = f"{cat.name}.db.t"
    spark.sql(f"""CREATE TABLE {t} (id INT, name STRING, score FLOAT, gone STRING) USING iceberg
                  PARTITIONED BY (bucket(4, id), truncate(2, name)) TBLPROPERTIES ('format-version' = '2')""")
    rows = "SELECT CAST(id AS INT), concat('n', CAST(id % 3 AS STRING)), CAST(id AS FLOAT) / 2, 'x' FROM range({lo}, {hi})"
    for fmt, lo in (("parquet", 0), ("orc", 40), ("avro", 80)):
        spark.sql(f"ALTER TABLE {t} SET TBLPROPERTIES ('write.format.default' = '{fmt}')")
        spark.sql(f"INSERT INTO {t} " + rows.format(lo=lo, hi=lo + 40))
    spark.sql(f"ALTER TABLE {t} ALTER COLUMN id TYPE BIGINT")
    spark.sql(f"ALTER TABLE {t} ALTER COLUMN score TYPE DOUBLE")
    spark.sql(f"ALTER TABLE {t} RENAME COLUMN score TO points")
    spark.sql(f"ALTER TABLE {t} DROP COLUMN gone")
    spark.sql(f"ALTER TABLE {t} ADD COLUMN extra STRING")
    spark.sql(f"ALTER TABLE {t} SET TBLPROPERTIES ('write.format.default' = 'parquet')")
    spark.sql(f"INSERT INTO {t} SELECT id, concat('n', CAST(id % 3 AS STRING)), id / 2.0, 'e' FROM range(120, 160)")
    query = f"SELECT id, name, points, extra FROM {t}"
    before = sorted(tuple(r) for r in spark.sql(query).collect())
    table = open_table(cat.settings(), "db.t")
    planned = state_of(table, "db.t")
    assert {f.file_format for f in planned.files} >= {"PARQUET", "ORC", "AVRO"}
    project = _project(tmp_path, cat)

    r = project.cli("plan")
    assert r.exit_code == 0, r.output
    planned_paths = {p for b in project.bins() for p in b}
    assert planned_paths
    r = project.cli("apply", str(project.plan_file))
    assert r.exit_code == 0, r.output
    assert {x["status"] for x in project.results()} == {"success"}
    table.refresh()
    after = state_of(table, "db.t")
    assert {f.path for f in planned.files} - {f.path for f in after.files} == planned_paths
    assert sorted(tuple(r) for r in spark.sql(query).collect()) == before
    r = project.cli("plan", "--detailed-exitcode")
    assert r.exit_code == 0, r.output


def test_spark_engine_on_a_streaming_append_table_with_hours_and_a_merge(iceberg_spark: Any, tmp_path: Path) -> None:
    """A Structured Streaming query appends micro-batch by micro-batch (one small file per batch and hour)
    into a v3 table partitioned by ``hours(ts)``, then a MERGE (merge-on-read: deletion vectors) updates and
    inserts rows: the spark engine replaces exactly the planned files, rows and row ids read back the same."""
    spark = iceberg_spark
    cat = register_catalog(spark, tmp_path / "ice")
    t = f"{cat.name}.db.events"
    spark.sql(f"""CREATE TABLE {t} (id BIGINT, ts TIMESTAMP, v STRING) USING iceberg PARTITIONED BY (hours(ts))
                  TBLPROPERTIES ('format-version' = '3', 'write.merge.mode' = 'merge-on-read')""")
    source = tmp_path / "source"
    for i in range(4):
        spark.sql(f"SELECT id, timestamp_seconds(1704067200 + (id % 3) * 3600) AS ts, concat('v', CAST(id AS STRING)) AS v "
                  f"FROM range({i * 30}, {i * 30 + 30})").coalesce(1).write.parquet(str(source / f"batch={i}"))
    stream = (spark.readStream.schema("id BIGINT, ts TIMESTAMP, v STRING").option("maxFilesPerTrigger", 1)
              .option("recursiveFileLookup", "true").parquet(str(source)))
    query = (stream.writeStream.format("iceberg").option("checkpointLocation", str(tmp_path / "checkpoint"))
             .trigger(availableNow=True).toTable(t))
    query.awaitTermination(120)
    spark.sql(f"""MERGE INTO {t} AS d USING (SELECT id, ts, 'merged' AS v FROM {t} WHERE id % 7 = 0
                  UNION ALL SELECT 1000 AS id, timestamp_seconds(1704067200) AS ts, 'new' AS v) AS s ON d.id = s.id
                  WHEN MATCHED THEN UPDATE SET v = s.v WHEN NOT MATCHED THEN INSERT *""")
    before = sorted(tuple(r) for r in spark.sql(f"SELECT id, ts, v FROM {t}").collect())
    lineage = sorted(tuple(r) for r in spark.sql(f"SELECT id, _row_id FROM {t}").collect())
    assert len(before) == 121
    table = open_table(cat.settings(), "db.events")
    planned = state_of(table, "db.events")
    assert len(planned.files) >= 12 and any(d.kind == "deletion_vector" for d in planned.delete_files)
    project = Project.make(tmp_path, "events", catalog=cat.name, policy_text=policy("events", cat.name),
                           profiles_text=_profiles(cat))
    r = project.cli("plan")
    assert r.exit_code == 0, r.output
    planned_paths = {p for b in project.bins() for p in b}
    r = project.cli("apply", str(project.plan_file))
    assert r.exit_code == 0, r.output
    table.refresh()
    after = state_of(table, "db.events")
    assert {f.path for f in planned.files} - {f.path for f in after.files} == planned_paths
    assert sorted(tuple(r) for r in spark.sql(f"SELECT id, ts, v FROM {t}").collect()) == before
    assert sorted(tuple(r) for r in spark.sql(f"SELECT id, _row_id FROM {t}").collect()) == lineage
    r = project.cli("plan", "--detailed-exitcode")
    assert r.exit_code == 0, r.output


def test_spark_engine_on_identity_date_and_string_partitions_a_sort_order_and_every_column_kind(
        iceberg_spark: Any, tmp_path: Path) -> None:
    """A v2 table partitioned by identity on a date and a string, with a sort order (WRITE ORDERED BY), columns
    of every kind (binary, timestamps with and without zone, decimal, nested struct, list and map, nulls),
    position deletes from a MERGE: the spark engine replaces exactly the planned files; Spark and pyiceberg
    read the same rows, time travel to the planned snapshot returns the old ones, the plan converges."""
    spark = iceberg_spark
    cat = register_catalog(spark, tmp_path / "ice")
    t = f"{cat.name}.db.t"
    spark.sql(f"""CREATE TABLE {t} (id BIGINT, d DATE, region STRING, raw BINARY, ntz TIMESTAMP_NTZ, tz TIMESTAMP,
                  amount DECIMAL(18, 4), info STRUCT<a: INT, b: STRING>, tags ARRAY<STRING>, attrs MAP<STRING, INT>)
                  USING iceberg PARTITIONED BY (d, region)
                  TBLPROPERTIES ('format-version' = '2', 'write.merge.mode' = 'merge-on-read')""")
    spark.sql(f"ALTER TABLE {t} WRITE ORDERED BY id DESC NULLS LAST")
    rows = """SELECT id, date_add(DATE'2024-03-01', CAST(id % 2 AS INT)), CASE WHEN id % 5 = 0 THEN NULL ELSE
              concat('r', CAST(id % 2 AS STRING)) END, CASE WHEN id % 4 = 0 THEN NULL ELSE CAST(concat('b', id) AS BINARY)
              END, CAST(timestamp_seconds(1709251200 + id * 61) AS TIMESTAMP_NTZ), timestamp_seconds(1709251200 + id),
              CAST(id AS DECIMAL(18, 4)) / 7, named_struct('a', CAST(id AS INT), 'b', IF(id % 3 = 0, NULL, 'x')),
              array(concat('t', id), NULL), map('k', CAST(id AS INT)) FROM range({lo}, {hi})"""
    for i in range(4):
        spark.sql(f"INSERT INTO {t} " + rows.format(lo=i * 25, hi=i * 25 + 25))
    spark.sql(f"""MERGE INTO {t} AS x USING (SELECT id FROM range(0, 100) WHERE id % 9 = 0) AS s ON x.id = s.id
                  WHEN MATCHED THEN DELETE""")
    cols = "id, d, region, raw, ntz, tz, amount, info.a, info.b, tags, map_keys(attrs), map_values(attrs)"
    query = f"SELECT {cols} FROM {t}"
    before = sorted((tuple(r) for r in spark.sql(query).collect()), key=repr)
    table = open_table(cat.settings(), "db.t")
    planned = state_of(table, "db.t")
    assert table.sort_order().fields and planned.delete_files
    project = _project(tmp_path, cat)
    r = project.cli("plan")
    assert r.exit_code == 0, r.output
    planned_paths = {p for b in project.bins() for p in b}
    assert len({f.partition_path for f in planned.files if f.path in planned_paths}) >= 4  # d x region, nulls too
    r = project.cli("apply", str(project.plan_file))
    assert r.exit_code == 0, r.output
    assert {x["status"] for x in project.results()} == {"success"}
    table.refresh()
    after = state_of(table, "db.t")
    assert {f.path for f in planned.files} - {f.path for f in after.files} == planned_paths
    snap = table.current_snapshot()
    assert snap is not None and snap.summary is not None and snap.summary.operation.value == "replace"
    assert sorted((tuple(r) for r in spark.sql(query).collect()), key=repr) == before
    at = f"SELECT {cols} FROM {t} VERSION AS OF {planned.snapshot_id}"
    assert sorted((tuple(r) for r in spark.sql(at).collect()), key=repr) == before
    read = table.scan().to_arrow()
    assert read.num_rows == len(before)
    assert sorted(zip(read.column("id").to_pylist(), read.column("raw").to_pylist())) == sorted(
        (r[0], None if r[3] is None else bytes(r[3])) for r in before)
    r = project.cli("plan", "--detailed-exitcode")
    assert r.exit_code == 0, r.output
