"""One Spark session serves both formats (issue 39: pyspark 4.1.x, Delta's jars and Iceberg's runtime together),
and an Iceberg table Spark writes through a JDBC catalog on sqlite is read without a JVM: compactor's
``state_of`` (formats/iceberg/state.py) sees exactly Spark's snapshot, data files and position delete files,
and a pyiceberg scan returns Spark's rows, deletes applied. The same session writes and OPTIMIZEs a Delta
table."""

from __future__ import annotations

import datetime as dt
from pathlib import Path
from typing import Any

import pytest

pytest.importorskip("pyiceberg", reason="pyiceberg is not installed (pip install 'compactor[iceberg]')")

from compactor.formats.iceberg.catalog import open_table  # noqa: E402
from compactor.formats.iceberg.state import state_of  # noqa: E402
from tests.iceberg.spark_tables import register_catalog  # noqa: E402

pytestmark = [pytest.mark.spark, pytest.mark.iceberg_jars, pytest.mark.delta_jars]

EPOCH = dt.datetime(1970, 1, 1)
EPOCH_UTC = dt.datetime(1970, 1, 1, tzinfo=dt.UTC)
US = dt.timedelta(microseconds=1)
#: three INSERTs of ten rows: ids 0..29, two groups, tstz across days, nulls in cat and amount
INSERT = """INSERT INTO {t}
SELECT id, CAST(id % 2 AS INT), CASE WHEN id % 3 = 0 THEN NULL ELSE concat('c', CAST(id % 3 AS STRING)) END,
       CASE WHEN id % 7 = 0 THEN NULL ELSE CAST(id AS DECIMAL(10, 2)) / 4 END,
       CAST(timestamp_seconds(1704067200 + id * 25000) AS TIMESTAMP_NTZ), timestamp_seconds(1704067200 + id * 25000),
       date_add(DATE '2024-01-01', CAST(id % 3 AS INT))
FROM range({lo}, {hi})"""


def _micros(v: Any) -> int | None:
    if v is None:
        return None
    return (v - (EPOCH_UTC if v.tzinfo is not None else EPOCH)) // US


def test_a_spark_written_iceberg_table_is_read_by_compactor_without_a_jvm(iceberg_spark: Any, tmp_path: Path) -> None:
    spark = iceberg_spark
    cat = register_catalog(spark, tmp_path / "ice")
    t = f"{cat.name}.db.events"
    spark.sql(f"""CREATE TABLE {t} (id BIGINT, grp INT, cat STRING, amount DECIMAL(10, 2), ts TIMESTAMP_NTZ,
                  tstz TIMESTAMP, day DATE) USING iceberg PARTITIONED BY (grp, days(tstz))
                  TBLPROPERTIES ('format-version' = '2', 'write.delete.mode' = 'merge-on-read')""")
    for i in range(3):
        spark.sql(INSERT.format(t=t, lo=i * 10, hi=i * 10 + 10))
    spark.sql(f"DELETE FROM {t} WHERE id % 5 = 0")  # merge-on-read: position delete files, no rewrite

    snapshot = spark.sql(f"SELECT snapshot_id FROM {t}.refs WHERE name = 'main'").collect()[0][0]
    files = spark.sql(f"SELECT content, file_path, file_size_in_bytes, record_count FROM {t}.files").collect()
    data = {r.file_path: (r.file_size_in_bytes, r.record_count) for r in files if r.content == 0}
    deletes = {r.file_path for r in files if r.content == 1}
    spark_rows = sorted((r[0], r[1], r[2], r[3], r[4], r[5], r[6]) for r in spark.sql(
        f"SELECT id, grp, cat, amount, unix_micros(CAST(ts AS TIMESTAMP)), unix_micros(tstz), day FROM {t}").collect())
    assert len(spark_rows) == 24 and len(data) > 3 and deletes

    # the same catalog through compactor's opener (pyiceberg's SqlCatalog, the same name): no JVM involved
    table = open_table(cat.settings(), "db.events")
    st = state_of(table, "db.events")
    assert (st.snapshot_id, st.format_version) == (snapshot, 2)
    assert {f.path: (f.size, f.record_count) for f in st.files} == data
    assert st.totals.records == 30 and st.totals.data_files == len(data)
    assert {d.path for d in st.delete_files} == deletes
    assert {d.kind for d in st.delete_files} == {"position"}
    assert sum(f.deleted_rows_at_most for f in st.files) >= 6 and st.totals.delete_records == 6
    assert all([v.name for v in f.partition] == ["grp", "tstz_day"] for f in st.files)
    assert [c.name for c in st.columns] == ["id", "grp", "cat", "amount", "ts", "tstz", "day"]

    scanned = table.scan().to_arrow().to_pylist()
    assert sorted((r["id"], r["grp"], r["cat"], r["amount"], _micros(r["ts"]), _micros(r["tstz"]), r["day"])
                  for r in scanned) == spark_rows

    # Delta in the same session: its extension and catalog work beside Iceberg's
    delta = tmp_path / "delta"
    spark.table(t).write.format("delta").save(str(delta))
    spark.table(t).limit(5).write.format("delta").mode("append").save(str(delta))
    spark.sql(f"OPTIMIZE delta.`{delta}`").collect()
    from deltalake import DeltaTable

    dtable = DeltaTable(str(delta))
    assert dtable.to_pyarrow_table().num_rows == 29
    assert dtable.history(1)[0]["operation"] == "OPTIMIZE"
