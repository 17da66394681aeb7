"""Iceberg's delete triggers (``compaction.triggers.max_deleted_rows_ratio``, ``delete_file_threshold``)
on Spark-written merge-on-read tables, through the CLI on the spark engine: a file whose file-scoped
deletes remove at least the ratio of its rows (default 0.3, Iceberg's ``delete-ratio-threshold``) is
planned whatever its size, alone in its bin, and the rewrite drops its deletes; a file below the ratio is
not; ``delete_file_threshold`` plans a file by its count of delete files. Rows stay the same (and v3 row
ids), the replaced file's deletes are no longer live, and the next plan converges."""

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

#: every file is above min_file_size: only a delete trigger plans one
POLICY = """version: 1
tables:
  - name: t
    format: iceberg
    catalog: {{name: {catalog}, namespace: db, table: t}}
    compaction: {{target_file_size: 1MiB, min_file_size: 1KiB, triggers: {{min_input_files: 2{extra}}}}}
"""


def _profiles(cat: JdbcCatalog) -> str:
    return (f"default:\n  target: dev\n  outputs:\n    dev:\n      engine: spark\n      catalogs:\n"
            f"        {cat.name}: {{type: sql, uri: \"{cat.uri}\", warehouse: \"{cat.warehouse}\"}}\n")


def _rows(spark: Any, t: str) -> list[tuple[Any, ...]]:
    return sorted(tuple(r) for r in spark.sql(f"SELECT id, grp, s FROM {t}").collect())


def _file_of(st: IcebergState, grp: int) -> Any:
    (f,) = [f for f in st.files if f.partition[0].value == grp]
    return f


@pytest.mark.parametrize("version", [2, 3])
def test_delete_triggers_plan_a_file_alone_and_the_rewrite_drops_its_deletes(
        iceberg_spark: Any, tmp_path: Path, version: int) -> None:
    spark = iceberg_spark
    cat = register_catalog(spark, tmp_path / "ice")
    t = f"{cat.name}.db.t"
    spark.sql(f"""CREATE TABLE {t} (id BIGINT, grp INT, s STRING) USING iceberg PARTITIONED BY (grp)
                  TBLPROPERTIES ('format-version' = '{version}', 'write.delete.mode' = 'merge-on-read',
                                 'write.distribution-mode' = 'hash')""")
    spark.sql(f"INSERT INTO {t} SELECT id, CAST(id % 3 AS INT), concat('s', CAST(id AS STRING)) FROM range(0, 3000)")
    spark.sql(f"DELETE FROM {t} WHERE grp = 0 AND id % 2 = 0")   # half of grp 0's rows
    spark.sql(f"DELETE FROM {t} WHERE grp = 1 AND id % 10 = 1")  # a tenth of grp 1's rows
    table = open_table(cat.settings(), "db.t")
    planned = state_of(table, "db.t")
    assert len(planned.files) == 3, [f.path for f in planned.files]  # one file per partition, none small
    half, tenth = _file_of(planned, 0), _file_of(planned, 1)
    assert half.deleted_rows_known == 500 and tenth.deleted_rows_known == 100, (half.deletes, tenth.deletes)
    before = _rows(spark, t)
    lineage = sorted(spark.sql(f"SELECT id, _row_id FROM {t}").collect()) if version >= 3 else None

    project = Project.make(tmp_path, "t", catalog=cat.name, policy_text=POLICY.format(catalog=cat.name, extra=""),
                           profiles_text=_profiles(cat))
    r = project.cli("plan")
    assert r.exit_code == 0, r.output
    assert project.bins() == [[half.path]], project.table_plan()  # 50% >= 0.3 alone; 10% is not planned
    r = project.cli("apply", str(project.plan_file))
    assert r.exit_code == 0, r.output
    assert [x["status"] for x in project.results()] == ["success"]
    table.refresh()
    after = state_of(table, "db.t")
    assert half.path not in {f.path for f in after.files}
    (output,) = [f for f in after.files if f.partition[0].value == 0]
    assert output.deletes == () and output.record_count == 500  # the deleted rows are gone, and their deletes
    assert not {d.path for d in half.deletes} & {d.path for d in after.delete_files}
    snap = table.current_snapshot()
    assert snap is not None and snap.summary is not None and snap.summary.operation.value == "replace"
    assert _rows(spark, t) == before
    assert table.scan().to_arrow().num_rows == len(before)
    if lineage is not None:
        assert sorted(spark.sql(f"SELECT id, _row_id FROM {t}").collect()) == lineage
    r = project.cli("plan", "--detailed-exitcode")
    assert r.exit_code == 0, r.output  # converged: the 10% file stays below the ratio

    # a file by its count of delete files: grp 1's one delete file reaches delete_file_threshold 1
    (project.root / "policies" / "t.yml").write_text(
        POLICY.format(catalog=cat.name, extra=", delete_file_threshold: 1"))
    r = project.cli("plan")
    assert r.exit_code == 0, r.output
    assert project.bins() == [[tenth.path]], project.table_plan()
    r = project.cli("apply", str(project.plan_file))
    assert r.exit_code == 0, r.output
    assert [x["status"] for x in project.results()] == ["success"]
    table.refresh()
    assert all(f.deletes == () for f in state_of(table, "db.t").files)
    assert _rows(spark, t) == before
    r = project.cli("plan", "--detailed-exitcode")
    assert r.exit_code == 0, r.output
