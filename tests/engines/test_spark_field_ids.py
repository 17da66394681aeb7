"""The spark engine writes the Parquet field ids the table's schema carries (a Delta table's column mapping
ids: formats/delta/read/column_mapping.py) at every nesting level, as the local engine does through pyarrow
(engines/spark_schema.py: each StructField's ``parquet.field.id``), and checks them on every output."""

from __future__ import annotations

from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from compactor.engines.base import BinJob, inputs_at
from compactor.engines.spark_schema import SPARK_FIELD_ID, field_ids, with_field_ids
from compactor.project.model import Target


def _id(name: str, t: pa.DataType, ident: int) -> pa.Field:
    return pa.field(name, t, metadata={b"PARQUET:field_id": str(ident).encode()})


NESTED = pa.struct([_id("col-b", pa.int32(), 3), _id("col-c", pa.string(), 4)])
SCHEMA = pa.schema([_id("col-a", pa.int64(), 1), _id("col-s", NESTED, 2),
                    _id("col-l", pa.list_(pa.field("element", pa.struct([_id("col-x", pa.int64(), 6)]))), 5),
                    _id("col-m", pa.map_(pa.string(), pa.struct([_id("col-y", pa.int64(), 8)])), 7)])
IDS = {"col-a": 1, "col-s": 2, "col-s.col-b": 3, "col-s.col-c": 4, "col-l": 5, "col-l.[].col-x": 6,
       "col-m": 7, "col-m.{value}.col-y": 8}


def test_field_ids_by_path_whatever_a_writer_names_list_elements() -> None:
    assert field_ids(SCHEMA) == IDS
    renamed = pa.schema([SCHEMA.field("col-a"), SCHEMA.field("col-s"),
                         _id("col-l", pa.list_(pa.field("item", pa.struct([_id("col-x", pa.int64(), 6)]))), 5),
                         SCHEMA.field("col-m")])
    assert field_ids(renamed) == IDS
    assert field_ids(pa.schema([("a", pa.int64())])) == {}


def test_each_struct_field_carries_its_id_for_spark() -> None:
    pytest.importorskip("pyspark.sql")
    from pyspark.sql.pandas.types import from_arrow_schema

    spark = with_field_ids(SCHEMA, from_arrow_schema(SCHEMA))
    a, s, lst, m = spark.fields
    assert (a.metadata[SPARK_FIELD_ID], s.metadata[SPARK_FIELD_ID]) == (1, 2)
    assert [f.metadata[SPARK_FIELD_ID] for f in s.dataType.fields] == [3, 4]
    assert lst.dataType.elementType.fields[0].metadata[SPARK_FIELD_ID] == 6
    assert m.dataType.valueType.fields[0].metadata[SPARK_FIELD_ID] == 8
    plain = from_arrow_schema(pa.schema([("a", pa.int64())]))
    assert with_field_ids(pa.schema([("a", pa.int64())]), plain) is plain


@pytest.mark.spark
@pytest.mark.parametrize("threads", [None, 1], ids=["one-job", "job-per-bin"])
def test_the_spark_engine_writes_every_field_id(spark, tmp_path: Path, threads: int | None) -> None:
    from compactor.engines.spark import SparkEngine

    def write(name: str, start: int) -> str:
        rows = [{"col-a": i, "col-s": {"col-b": i, "col-c": f"c{i}"}, "col-l": [{"col-x": i}],
                 "col-m": [("k", {"col-y": i})]} for i in range(start, start + 5)]
        pq.write_table(pa.Table.from_pylist(rows, schema=SCHEMA), tmp_path / name)
        return str(tmp_path / name)

    files = [write(f"{n}.parquet", 10 * n) for n in range(4)]
    jobs = [BinJob(inputs_at(*files[:2]), str(tmp_path / "out0.parquet"), str(tmp_path / "_compactor_staging_0")),
            BinJob(inputs_at(*files[2:]), str(tmp_path / "out1.parquet"), str(tmp_path / "_compactor_staging_1"))]
    before = spark.conf.get("spark.sql.parquet.fieldId.read.enabled", None)  # an earlier test's session may set it
    written = SparkEngine(Target(engine="spark", threads=threads)).rewrite(jobs, SCHEMA)
    for w in written:
        assert field_ids(pq.read_schema(w.location)) == IDS
        assert w.rows == 10
    assert spark.conf.get("spark.sql.parquet.fieldId.read.enabled", None) == before  # the session's own, restored
