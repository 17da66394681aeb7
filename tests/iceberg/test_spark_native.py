"""``compaction.method: optimize`` on Iceberg tables (formats/iceberg/spark_native.py): Iceberg's own
RewriteDataFiles in the tests' shared Spark session, scoped to the planned partitions, end to end through
the CLI on Spark-written v2 tables partitioned by identity and ``days``: the new snapshot is a ``replace``,
Spark and pyiceberg read the same rows, a partition the plan left out keeps its files, a file appended to a
planned partition after planning is rewritten too (the native semantics, said in the outcome), the next plan
plans nothing. A DELETE after planning makes the actions it touches stale, committing nothing of them; a
filter that cannot tell a planned partition from an unplanned one (an older spec) runs nothing; the local
engine refuses the method at plan time, naming the spark engine."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

pytest.importorskip("pyiceberg", reason="pyiceberg is not installed (pip install 'compactor[iceberg]')")

from compactor.formats.iceberg.catalog import open_table  # noqa: E402
from compactor.formats.iceberg.state import IcebergState, state_of  # noqa: E402
from tests.iceberg.project import Project  # noqa: E402
from tests.iceberg.spark_tables import JdbcCatalog, register_catalog  # noqa: E402

pytestmark = [pytest.mark.spark, pytest.mark.iceberg_jars, pytest.mark.delta_jars]

#: rows of two days (ts) and three groups (grp): each insert writes one small file per (grp, day)
ROWS = """SELECT id, CAST(id % 3 AS INT) AS grp, concat('s', CAST(id % 7 AS STRING)) AS s,
  timestamp_seconds(1704067200 + (id % 2) * 86400 + id) AS ts FROM range({lo}, {hi})"""
METHOD = "native rewrite_data_files"


def _project(tmp_path: Path, cat: JdbcCatalog, *, engine: str = "spark", where: str | None = "grp <> 2",
             triggers: str = "") -> Project:
    scope = f", partitions: {{where: \"{where}\"}}" if where else ""
    policy = ("version: 1\ntables:\n  - name: t\n    format: iceberg\n"
              f"    catalog: {{name: {cat.name}, namespace: db, table: t}}\n"
              f"    compaction: {{target_file_size: 1MiB, method: optimize, triggers: {{min_input_files: 2{triggers}}}{scope}}}\n")
    profiles = (f"default:\n  target: dev\n  outputs:\n    dev:\n      engine: {engine}\n      catalogs:\n"
                f"        {cat.name}: {{type: sql, uri: \"{cat.uri}\", warehouse: \"{cat.warehouse}\"}}\n")
    return Project.make(tmp_path, "t", catalog=cat.name, policy_text=policy, profiles_text=profiles)


def _make(spark: Any, tmp_path: Path, *, older_spec: bool = False) -> tuple[JdbcCatalog, str]:
    """A v2 merge-on-read table partitioned by (grp, days(ts)), four inserts, a DELETE (position deletes).
    ``older_spec``: first partitioned by grp alone, with one file per group written before the evolution."""
    cat = register_catalog(spark, tmp_path / "ice")
    t = f"{cat.name}.db.t"
    spark.sql(f"""CREATE TABLE {t} (id BIGINT, grp INT, s STRING, ts TIMESTAMP) USING iceberg
                  PARTITIONED BY (grp{'' if older_spec else ', days(ts)'})
                  TBLPROPERTIES ('format-version' = '2', 'write.delete.mode' = 'merge-on-read')""")
    if older_spec:
        spark.sql(f"INSERT INTO {t} " + ROWS.format(lo=1000, hi=1030))
        spark.sql(f"ALTER TABLE {t} ADD PARTITION FIELD days(ts)")
    for i in range(4):
        spark.sql(f"INSERT INTO {t} " + ROWS.format(lo=i * 60, hi=i * 60 + 60))
    spark.sql(f"DELETE FROM {t} WHERE id % 11 = 0")
    return cat, t


def _rows(spark: Any, t: str) -> list[tuple[Any, ...]]:
    return sorted(tuple(r) for r in spark.sql(f"SELECT id, grp, s, ts FROM {t}").collect())


def _pyiceberg_rows(table: Any) -> list[tuple[Any, ...]]:
    got = table.scan(selected_fields=("id", "grp", "s")).to_arrow().to_pylist()
    return sorted((r["id"], r["grp"], r["s"]) for r in got)


def _files_of(state: IcebergState, grp: int) -> set[str]:
    return {f.path for f in state.files if any(v.name == "grp" and v.value == grp for v in f.partition)}


def test_optimize_runs_rewrite_data_files_on_exactly_the_planned_partitions(iceberg_spark: Any, tmp_path: Path) -> None:
    spark = iceberg_spark
    cat, t = _make(spark, tmp_path)
    table = open_table(cat.settings(), "db.t")
    project = _project(tmp_path, cat)
    r = project.cli("plan")
    assert r.exit_code == 0, r.output
    plan = project.table_plan()
    assert {a["partition"]["grp"] for a in plan["actions"]} == {"0", "1"}, plan["actions"]
    assert all("appended to it since planning" in a["reason"] for a in plan["actions"])
    planned = state_of(table, "db.t")
    planned_paths = {p for b in project.bins() for p in b}
    assert any(f.deletes for f in planned.files if f.path in planned_paths), "planned files with position deletes"
    untouched = _files_of(planned, 2)
    assert len(untouched) >= 4  # small files the native rewrite would take were it not scoped
    spark.sql(f"INSERT INTO {t} SELECT 5000 AS id, 0 AS grp, 'late' AS s, timestamp_seconds(1704067200) AS ts")
    table.refresh()
    late = {f.path for f in state_of(table, "db.t").files} - {f.path for f in planned.files}
    before = _rows(spark, t)
    before_pyiceberg = _pyiceberg_rows(table)

    r = project.cli("apply", str(project.plan_file))
    assert r.exit_code == 0, r.output
    assert "native rewrite_data_files" in r.output
    assert r.output.count("appended to it since planning are rewritten too") == 1, r.output  # said once a group
    results = project.results()
    assert {x["status"] for x in results} == {"success"}, results
    assert {x["details"]["method"] for x in results} == {METHOD}
    assert any("(1 such file(s)" in x["details"]["note"] for x in results), results
    table.refresh()
    after = state_of(table, "db.t")
    snap = table.current_snapshot()
    assert snap is not None and snap.summary is not None and snap.summary.operation.value == "replace"
    live = {f.path for f in after.files}
    assert not (planned_paths | late) & live  # the planned files, and the one appended since, were rewritten
    assert untouched <= live  # the partition the plan left out keeps its files
    assert sum(x["files_removed"] for x in results) == len(planned_paths | late)
    assert sum(x["rows_before"] for x in results) == sum(x["rows_after"] for x in results) == len(before) - len(
        [r for r in before if r[1] == 2])
    assert _rows(spark, t) == before
    assert _pyiceberg_rows(table) == before_pyiceberg
    r = project.cli("plan", "--detailed-exitcode")
    assert r.exit_code == 0, r.output


def test_a_delete_after_planning_makes_the_native_rewrite_stale_and_commits_nothing(
        iceberg_spark: Any, tmp_path: Path) -> None:
    """The DELETE puts a position delete on every planned file: every action is stale, no snapshot is
    committed, every row reads as the DELETE left it."""
    spark = iceberg_spark
    cat, t = _make(spark, tmp_path)
    table = open_table(cat.settings(), "db.t")
    project = _project(tmp_path, cat)
    r = project.cli("plan")
    assert r.exit_code == 0, r.output
    spark.sql(f"DELETE FROM {t} WHERE id % 7 = 3")
    table.refresh()
    head = table.current_snapshot()
    expected = _rows(spark, t)

    r = project.cli("apply", str(project.plan_file))
    assert r.exit_code == 0, r.output  # a stale action is no failure: the next plan takes the table as it is
    assert {x["status"] for x in project.results()} == {"stale"}, project.results()
    table.refresh()
    assert table.current_snapshot() == head
    assert _rows(spark, t) == expected


def test_a_filter_that_cannot_tell_an_older_specs_partition_apart_runs_nothing(iceberg_spark: Any, tmp_path: Path) -> None:
    """The table was partitioned by grp alone first (one file per group, not planned): the planned
    partitions' filter (grp and day) selects those files too, since that spec has no day field: nothing
    runs, naming why, and method rewrite is the way."""
    spark = iceberg_spark
    cat, t = _make(spark, tmp_path, older_spec=True)
    table = open_table(cat.settings(), "db.t")
    project = _project(tmp_path, cat, where="grp = 0")
    r = project.cli("plan")
    assert r.exit_code == 0, r.output
    assert project.table_plan()["actions"]
    table.refresh()
    head = table.current_snapshot()
    expected = _rows(spark, t)

    r = project.cli("apply", str(project.plan_file))
    assert r.exit_code == 1, r.output
    results = project.results()
    assert {x["status"] for x in results} == {"error"}, results
    assert all("cannot tell them apart" in x["error"] for x in results), results
    table.refresh()
    assert table.current_snapshot() == head
    assert _rows(spark, t) == expected


def test_the_local_engine_refuses_method_optimize_at_plan_time_naming_the_spark_engine(
        iceberg_spark: Any, tmp_path: Path) -> None:
    cat, _ = _make(iceberg_spark, tmp_path)
    project = _project(tmp_path, cat, engine="local")
    r = project.cli("plan")
    assert r.exit_code == 0, r.output
    plan = project.table_plan()
    assert plan["actions"] == []
    (skip,) = plan["skipped"]
    assert skip["reason"] == "unsupported" and "needs the spark engine" in skip["message"], skip
    assert "use the spark engine (Iceberg's rewrite_data_files compacts it)" in r.output, r.output


def test_bucket_truncate_hours_months_and_null_partitions_are_scoped_exactly(iceberg_spark: Any, tmp_path: Path) -> None:
    """Hidden partitions of every parametrised and time transform, and a null partition value (IS NULL of the
    transform): every planned file is rewritten, rows read back the same, the next plan plans nothing."""
    spark = iceberg_spark
    cat = register_catalog(spark, tmp_path / "ice")
    t = f"{cat.name}.db.t"
    spark.sql(f"""CREATE TABLE {t} (id BIGINT, grp INT, s STRING, ts TIMESTAMP, d DATE) USING iceberg
                  PARTITIONED BY (bucket(2, grp), truncate(2, s), hours(ts), months(d))
                  TBLPROPERTIES ('format-version' = '2')""")
    for i in range(3):
        spark.sql(f"""INSERT INTO {t} SELECT id, CAST(id % 2 AS INT), CASE WHEN id % 3 = 0 THEN NULL
                      ELSE concat('ab', CAST(id AS STRING)) END, timestamp_seconds(1704067200 + id),
                      date_add(DATE '2024-03-01', CAST(id % 20 AS INT)) FROM range({i * 30}, {i * 30 + 30})""")
    table = open_table(cat.settings(), "db.t")
    planned = state_of(table, "db.t")
    assert any(v.value is None for f in planned.files for v in f.partition)  # a null partition value
    before = _rows_of(spark, t)
    project = _project(tmp_path, cat, where=None)
    r = project.cli("plan")
    assert r.exit_code == 0, r.output
    planned_paths = {p for b in project.bins() for p in b}
    assert planned_paths == {f.path for f in planned.files}, "every partition holds several small files"

    r = project.cli("apply", str(project.plan_file))
    assert r.exit_code == 0, r.output
    assert {x["status"] for x in project.results()} == {"success"}, project.results()
    table.refresh()
    assert not planned_paths & {f.path for f in state_of(table, "db.t").files}
    assert _rows_of(spark, t) == before
    r = project.cli("plan", "--detailed-exitcode")
    assert r.exit_code == 0, r.output


def _rows_of(spark: Any, t: str) -> list[tuple[Any, ...]]:
    return sorted((tuple(r) for r in spark.sql(f"SELECT id, grp, s, ts, d FROM {t}").collect()), key=repr)


def test_a_file_planned_alone_for_its_deletes_is_taken_by_iceberg_too(iceberg_spark: Any, tmp_path: Path) -> None:
    """A quarter of each file's rows deleted, the policy's max_deleted_rows_ratio 0.2 (below Iceberg's own
    0.3): each file is planned alone for its deletes, and the native rewrite takes it (delete-ratio-threshold
    follows the plan), drops its deletes, and the next plan plans nothing."""
    spark = iceberg_spark
    cat = register_catalog(spark, tmp_path / "ice")
    t = f"{cat.name}.db.t"
    spark.sql(f"""CREATE TABLE {t} (id BIGINT, grp INT, s STRING, ts TIMESTAMP) USING iceberg PARTITIONED BY (grp)
                  TBLPROPERTIES ('format-version' = '2', 'write.delete.mode' = 'merge-on-read')""")
    spark.sql(f"INSERT INTO {t} " + ROWS.format(lo=0, hi=120))
    spark.sql(f"DELETE FROM {t} WHERE id % 4 = 0")
    before = _rows(spark, t)
    project = _project(tmp_path, cat, where=None, triggers=", max_deleted_rows_ratio: 0.2")
    r = project.cli("plan")
    assert r.exit_code == 0, r.output
    actions = project.table_plan()["actions"]
    assert len(actions) == 3 and {a["input_files"] for a in actions} == {1}, actions

    r = project.cli("apply", str(project.plan_file))
    assert r.exit_code == 0, r.output
    assert {x["status"] for x in project.results()} == {"success"}, project.results()
    assert _rows(spark, t) == before
    r = project.cli("plan", "--detailed-exitcode")
    assert r.exit_code == 0, r.output
