"""A format-version 3 table's snapshot expiry on the spark engine (formats/iceberg/spark_expire.py): pyiceberg
0.12 cannot commit to v3 metadata, so the spark engine expires the planned snapshots with Iceberg's own
library, by id only. On a Spark-written v3 table whose ``history.expire.max-snapshot-age-ms`` would let
Iceberg expire every snapshot older than a millisecond: exactly the planned snapshots go (the newest
``retain_last`` stay), exactly the planned files are deleted (through
the deletion gate), the rows are the same, and the next plan converges. A tag made on a planned snapshot
after planning makes the expiry stale: nothing is committed or deleted."""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any

import pytest

pytest.importorskip("pyiceberg", reason="pyiceberg is not installed (pip install 'compactor[iceberg]')")

from compactor.formats.iceberg.catalog import open_table  # noqa: E402
from tests.iceberg.project import Project  # noqa: E402
from tests.iceberg.spark_tables import JdbcCatalog, register_catalog  # noqa: E402

pytestmark = [pytest.mark.spark, pytest.mark.iceberg_jars, pytest.mark.delta_jars]


def _project(tmp_path: Path, cat: JdbcCatalog) -> Project:
    policy = ("version: 1\ntables:\n  - name: t\n    format: iceberg\n"
              f"    catalog: {{name: {cat.name}, namespace: db, table: t}}\n"
              "    compaction: {enabled: false}\n    retention:\n      allow_unsafe_retention: true\n"
              "      min_reader_lag: 1s\n      expire_snapshots: {enabled: true, older_than: 1s, retain_last: 3}\n")
    profiles = (f"default:\n  target: dev\n  outputs:\n    dev:\n      engine: spark\n      catalogs:\n"
                f"        {cat.name}: {{type: sql, uri: \"{cat.uri}\", warehouse: \"{cat.warehouse}\"}}\n")
    return Project.make(tmp_path, "t", catalog=cat.name, policy_text=policy, profiles_text=profiles)


def _history(spark: Any, tmp_path: Path) -> tuple[JdbcCatalog, str, list[int]]:
    """Two appends, a copy-on-write DELETE of a row of the first (its file freed once the snapshots up to
    the DELETE go), three more appends, a second ago; the table's own snapshot age is 1 ms. Returns the
    catalog, the table and the snapshot ids in commit order."""
    cat = register_catalog(spark, tmp_path / "ice")
    t = f"{cat.name}.db.t"
    spark.sql(f"""CREATE TABLE {t} (id BIGINT, s STRING) USING iceberg
                  TBLPROPERTIES ('format-version' = '3', 'write.delete.mode' = 'copy-on-write',
                                 'history.expire.max-snapshot-age-ms' = '1')""")
    insert = f"INSERT INTO {t} SELECT /*+ COALESCE(1) */ id, concat('s', CAST(id AS STRING)) FROM range({{}}, {{}})"
    spark.sql(insert.format(0, 10))
    spark.sql(insert.format(10, 20))
    spark.sql(f"DELETE FROM {t} WHERE id = 0")
    for i in range(2, 5):
        spark.sql(insert.format(i * 10, i * 10 + 10))
    time.sleep(1.1)
    ids = [r[0] for r in spark.sql(f"SELECT snapshot_id FROM {t}.snapshots ORDER BY committed_at").collect()]
    return cat, t, ids


def test_a_v3_tables_planned_snapshots_expire_by_id_through_icebergs_library(iceberg_spark: Any, tmp_path: Path) -> None:
    spark = iceberg_spark
    cat, t, ids = _history(spark, tmp_path)
    before = sorted(spark.sql(f"SELECT id, s FROM {t}").collect())
    project = _project(tmp_path, cat)
    r = project.cli("plan", "--detailed-exitcode")
    assert r.exit_code == 2, r.output
    (action,) = [a for a in project.table_plan()["actions"] if a["type"] == "expire_snapshots"]
    planned = ids[:3]  # older than 1s and not among the newest 3 (Iceberg's own age would take ids[3:5] too)
    assert action["params"]["snapshots"] == sorted(planned), (action, ids)
    files = action["params"]["files"]
    assert len(files) == 1, files  # the file the DELETE replaced: only the expired snapshots name it
    freed = Path(files[0].removeprefix("file:").removeprefix("//"))
    assert freed.exists()

    r = project.cli("apply", str(project.plan_file))
    assert r.exit_code == 0, r.output
    (result,) = [x for x in project.results() if x["type"] == "expire_snapshots"]
    assert result["status"] == "success", result
    table = open_table(cat.settings(), "db.t")
    assert sorted(s.snapshot_id for s in table.metadata.snapshots) == sorted(set(ids) - set(planned))
    assert not freed.exists() and result["files_removed"] == 1
    assert sorted(spark.sql(f"SELECT id, s FROM {t}").collect()) == before
    r = project.cli("plan", "--detailed-exitcode")
    assert r.exit_code == 0, r.output


def test_a_tag_made_on_a_planned_snapshot_after_planning_makes_the_v3_expiry_stale(
        iceberg_spark: Any, tmp_path: Path) -> None:
    spark = iceberg_spark
    cat, t, ids = _history(spark, tmp_path)
    project = _project(tmp_path, cat)
    assert project.cli("plan").exit_code == 0
    (action,) = [a for a in project.table_plan()["actions"] if a["type"] == "expire_snapshots"]
    freed = Path(action["params"]["files"][0].removeprefix("file:").removeprefix("//"))
    spark.sql(f"ALTER TABLE {t} CREATE TAG late AS OF VERSION {ids[0]}")
    r = project.cli("apply", str(project.plan_file))
    assert r.exit_code == 0, r.output  # stale is no failure: the next plan takes the table as it is
    (result,) = [x for x in project.results() if x["type"] == "expire_snapshots"]
    assert result["status"] == "stale", result
    table = open_table(cat.settings(), "db.t")
    assert sorted(s.snapshot_id for s in table.metadata.snapshots) == sorted(ids)  # nothing committed
    assert freed.exists()
