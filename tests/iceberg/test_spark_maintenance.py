"""Iceberg's own maintenance on the spark engine (formats/iceberg/maintenance_run.py), end to end through the
CLI in the tests' shared session, on a Spark-written v2 merge-on-read table partitioned by ``grp`` and
``days(ts)`` with many small appends (many manifests) and many DELETEs (with ``write.delete.granularity =
partition``: one position delete file per partition per DELETE): the plan lists the manifest rewrite and a
position delete rewrite per partition with their exact files; apply runs Iceberg's actions; Spark and
pyiceberg read the same rows before and after, delete files and manifests are fewer, no data file changed,
and the next plan plans nothing. A change after planning that removes or adds a planned input (a DELETE in
one partition, an append) makes those actions stale: nothing of theirs is committed."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

pytest.importorskip("pyiceberg", reason="pyiceberg is not installed (pip install 'compactor[iceberg]')")

from compactor.formats.iceberg.catalog import open_table  # noqa: E402
from compactor.formats.iceberg.state import IcebergState, state_of  # noqa: E402
from compactor.runtime import faults  # noqa: E402
from tests.iceberg.project import Project  # noqa: E402
from tests.iceberg.spark_tables import JdbcCatalog, register_catalog  # noqa: E402

pytestmark = [pytest.mark.spark, pytest.mark.iceberg_jars, pytest.mark.delta_jars]

APPENDS = 8
DELETES = 5


def _make(spark: Any, tmp_path: Path) -> tuple[JdbcCatalog, str]:
    cat = register_catalog(spark, tmp_path / "ice")
    t = f"{cat.name}.db.t"
    spark.sql(f"""CREATE TABLE {t} (id BIGINT, grp INT, ts TIMESTAMP, s STRING) USING iceberg
                  PARTITIONED BY (grp, days(ts))
                  TBLPROPERTIES ('format-version' = '2', 'write.delete.mode' = 'merge-on-read',
                                 'write.delete.granularity' = 'partition')""")
    for i in range(APPENDS):
        spark.sql(f"""INSERT INTO {t} SELECT id, CAST(id % 2 AS INT), timestamp_seconds(1704067200 + (id % 2) * 86400),
                      concat('s', CAST(id AS STRING)) FROM range({i * 40}, {i * 40 + 40})""")
    for k in range(DELETES):
        spark.sql(f"DELETE FROM {t} WHERE id % 23 = {k}")
    return cat, t


def _project(tmp_path: Path, cat: JdbcCatalog, manifests: bool = True, compaction: bool = False) -> Project:
    profiles = (f"default:\n  target: dev\n  outputs:\n    dev:\n      engine: spark\n      catalogs:\n"
                f"        {cat.name}: {{type: sql, uri: \"{cat.uri}\", warehouse: \"{cat.warehouse}\"}}\n")
    policy = ("version: 1\ntables:\n  - name: t\n    format: iceberg\n"
              f"    catalog: {{name: {cat.name}, namespace: db, table: t}}\n    compaction:\n"
              + ("      target_file_size: 1MiB\n      triggers: {min_input_files: 2}\n" if compaction else
                 "      enabled: false\n") +
              "      position_deletes: {enabled: true, min_input_files: 3}\n"
              f"      manifests: {{enabled: {'true' if manifests else 'false'}, min_count: 5}}\n")
    return Project.make(tmp_path, "t", catalog=cat.name, policy_text=policy, profiles_text=profiles)


def _rows(spark: Any, t: str) -> list[tuple[Any, ...]]:
    return sorted(tuple(r) for r in spark.sql(f"SELECT id, grp, ts, s FROM {t}").collect())


def _position_deletes(st: IcebergState) -> dict[str, set[str]]:
    out: dict[str, set[str]] = {}
    for d in st.delete_files:
        out.setdefault("/".join(v.text for v in d.partition), set()).add(d.path)
    return out


def test_plan_lists_the_exact_inputs_apply_rewrites_them_rows_stay_and_the_plan_converges(
        iceberg_spark: Any, tmp_path: Path) -> None:
    spark = iceberg_spark
    cat, t = _make(spark, tmp_path)
    table = open_table(cat.settings(), "db.t")
    before = state_of(table, "db.t")
    rows = _rows(spark, t)
    deletes = _position_deletes(before)
    assert sorted(len(v) for v in deletes.values()) == [DELETES, DELETES], deletes
    data_manifests = [m.path for m in before.manifests if m.content == "data"]
    assert len(data_manifests) >= APPENDS
    project = _project(tmp_path, cat)

    r = project.cli("plan")
    assert r.exit_code == 0, r.output
    assert "rewrite_manifests" in r.output and "rewrite_position_deletes" in r.output, r.output
    actions = project.table_plan()["actions"]
    assert [a["type"] for a in actions] == ["rewrite_manifests", "rewrite_position_deletes",
                                            "rewrite_position_deletes"]
    assert all(a["precondition"]["table_version"] == before.snapshot_id for a in actions)
    manifests = actions[0]["params"]["files"]
    assert set(data_manifests) <= set(manifests) and set(manifests) <= {m.path for m in before.manifests}
    planned_deletes = {"/".join(a["partition"][c] for c in ("grp", "ts_day")): set(a["params"]["files"])
                       for a in actions[1:]}
    assert planned_deletes == deletes

    r = project.cli("apply", str(project.plan_file))
    assert r.exit_code == 0, r.output
    results = project.results()
    assert [x["status"] for x in results] == ["success"] * 3, results
    assert results[0]["files_removed"] == len(manifests) and results[1]["files_removed"] == DELETES

    table.refresh()
    after = state_of(table, "db.t")
    assert _rows(spark, t) == rows
    assert table.scan().to_arrow().num_rows == len(rows)
    assert {f.path for f in after.files} == {f.path for f in before.files}  # no data file added or removed
    assert after.totals.records == before.totals.records
    assert sorted(len(v) for v in _position_deletes(after).values()) == [1, 1]  # each partition's merged into one
    assert not set(manifests) & {m.path for m in after.manifests}
    assert len(after.manifests) < len(before.manifests)

    r = project.cli("plan", "--detailed-exitcode")
    assert r.exit_code == 0, r.output


def test_a_change_after_planning_makes_the_touched_actions_stale_and_commits_nothing_of_theirs(
        iceberg_spark: Any, tmp_path: Path) -> None:
    """After planning, a DELETE in grp 0 (a new delete file in one planned partition) and an append (a new
    manifest): the manifest rewrite and grp 0's delete rewrite are stale, grp 1's still runs."""
    spark = iceberg_spark
    cat, t = _make(spark, tmp_path)
    table = open_table(cat.settings(), "db.t")
    project = _project(tmp_path, cat)
    r = project.cli("plan")
    assert r.exit_code == 0, r.output
    spark.sql(f"DELETE FROM {t} WHERE grp = 0 AND id % 29 = 1")
    spark.sql(f"""INSERT INTO {t} SELECT id, 1, timestamp_seconds(1704067200 + 86400), 'late' FROM range(1000, 1010)""")
    table.refresh()
    changed = state_of(table, "db.t")
    rows = _rows(spark, t)

    r = project.cli("apply", str(project.plan_file))
    assert r.exit_code == 0, r.output
    statuses = [(x["type"], (x["partition"] or {}).get("grp"), x["status"]) for x in project.results()]
    assert statuses == [("rewrite_manifests", None, "stale"), ("rewrite_position_deletes", "0", "stale"),
                        ("rewrite_position_deletes", "1", "success")], statuses
    table.refresh()
    after = state_of(table, "db.t")
    assert _rows(spark, t) == rows
    assert {m.path for m in changed.manifests if m.content == "data"} <= {m.path for m in after.manifests}
    grp0 = {p for k, v in _position_deletes(changed).items() if k.startswith("0/") for p in v}
    assert grp0 <= {d.path for d in after.delete_files}  # grp 0's delete files untouched
    assert len(_position_deletes(after)["1/2024-01-02"]) == 1


def test_bucket_truncate_and_null_partitions_are_selected_exactly(iceberg_spark: Any, tmp_path: Path) -> None:
    """Iceberg's filter for a partition of ``bucket(2, id)``, ``truncate(2, s)`` and an identity field that is
    null selects exactly that partition's delete files (a wrong term would select none or more: stale)."""
    spark = iceberg_spark
    cat = register_catalog(spark, tmp_path / "ice")
    t = f"{cat.name}.db.t"
    spark.sql(f"""CREATE TABLE {t} (id BIGINT, grp INT, ts TIMESTAMP, s STRING) USING iceberg
                  PARTITIONED BY (bucket(2, id), truncate(2, s), grp)
                  TBLPROPERTIES ('format-version' = '2', 'write.delete.mode' = 'merge-on-read',
                                 'write.delete.granularity' = 'partition')""")
    for i in range(3):
        spark.sql(f"""INSERT INTO {t} SELECT id, CASE WHEN id % 3 = 0 THEN NULL ELSE 1 END, current_timestamp(),
                      CASE WHEN id % 2 = 0 THEN 'aa' ELSE 'ab' END FROM range({i * 30}, {i * 30 + 30})""")
    for k in range(3):
        spark.sql(f"DELETE FROM {t} WHERE id % 7 = {k}")
    table = open_table(cat.settings(), "db.t")
    before = state_of(table, "db.t")
    rows = _rows(spark, t)
    project = _project(tmp_path, cat)
    r = project.cli("plan")
    assert r.exit_code == 0, r.output
    planned = [a for a in project.table_plan()["actions"] if a["type"] == "rewrite_position_deletes"]
    assert any(a["partition"]["grp"] == "null" for a in planned), planned  # as the transforms render a null
    r = project.cli("apply", str(project.plan_file))
    assert r.exit_code == 0, r.output
    assert {x["status"] for x in project.results()} == {"success"}, project.results()
    table.refresh()
    after = state_of(table, "db.t")
    assert _rows(spark, t) == rows
    assert {f.path for f in after.files} == {f.path for f in before.files}
    rewritten = {p for a in planned for p in a["params"]["files"]}
    assert not rewritten & {d.path for d in after.delete_files}
    r = project.cli("plan", "--detailed-exitcode")
    assert r.exit_code == 0, r.output


def test_a_delete_racing_the_rewrite_stays_live_and_only_the_listed_files_are_rewritten(
        iceberg_spark: Any, tmp_path: Path) -> None:
    """A DELETE in grp 1's partition committed after compactor's check of the inputs and before Iceberg's
    action runs: the action plans from the metadata compactor checked, so it rewrites exactly the listed
    files; Iceberg's commit lands on top of the DELETE, whose delete file stays live, and no row comes back."""
    spark = iceberg_spark
    cat, t = _make(spark, tmp_path)
    table = open_table(cat.settings(), "db.t")
    project = _project(tmp_path, cat, manifests=False)
    r = project.cli("plan")
    assert r.exit_code == 0, r.output
    actions = project.table_plan()["actions"]
    assert [a["partition"]["grp"] for a in actions] == ["0", "1"]
    rows = _rows(spark, t)
    expected = [row for row in rows if not (row[1] == 1 and row[0] % 31 == 3)]
    assert len(expected) < len(rows)
    seen: list[str] = []
    racing: list[set[str]] = []

    def race(name: str) -> None:
        if name == "iceberg.maintenance_checked":
            seen.append(name)
            if len(seen) == 2:  # grp 1's action, after its check
                table.refresh()
                known = {d.path for d in state_of(table, "db.t").delete_files}
                spark.sql(f"DELETE FROM {t} WHERE grp = 1 AND id % 31 = 3")
                table.refresh()
                racing.append({d.path for d in state_of(table, "db.t").delete_files} - known)

    previous = faults.set_hook(race)
    try:
        r = project.cli("apply", str(project.plan_file))
    finally:
        faults.set_hook(previous)
    assert r.exit_code == 0, r.output
    assert [x["status"] for x in project.results()] == ["success", "success"], project.results()
    assert set(project.results()[1]["details"]["files"]) == set(actions[1]["params"]["files"])
    (new,) = racing
    assert len(new) == 1
    table.refresh()
    live = {d.path for d in state_of(table, "db.t").delete_files}
    assert new <= live and not live & set(actions[1]["params"]["files"])
    assert _rows(spark, t) == expected


def test_with_compaction_the_manifest_rewrite_runs_first_and_a_compacted_partitions_deletes_go_stale(
        iceberg_spark: Any, tmp_path: Path) -> None:
    """Data-file compaction planned beside both: the manifest rewrite runs first (it leaves every file live,
    so the compaction still finds its inputs), the compaction removes each partition's delete files with
    its data files, so the position delete rewrites planned at the same snapshot are stale; rows unchanged,
    and the next plan plans nothing."""
    spark = iceberg_spark
    cat, t = _make(spark, tmp_path)
    rows = _rows(spark, t)
    project = _project(tmp_path, cat, compaction=True)
    r = project.cli("plan")
    assert r.exit_code == 0, r.output
    assert [a["type"] for a in project.table_plan()["actions"]] == [
        "rewrite_manifests", "compact", "compact", "rewrite_position_deletes", "rewrite_position_deletes"]
    r = project.cli("apply", str(project.plan_file))
    assert r.exit_code == 0, r.output
    assert [x["status"] for x in project.results()] == ["success", "success", "success", "stale", "stale"], \
        project.results()
    assert _rows(spark, t) == rows
    table = open_table(cat.settings(), "db.t")
    assert not state_of(table, "db.t").delete_files
    r = project.cli("plan", "--detailed-exitcode")
    assert r.exit_code == 0, r.output
