"""Per-column footer verification and the null-fill rule of the local rewrite (issue 18, finding 2)."""

from __future__ import annotations

from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from compactor.engines.base import BinJob
from compactor.engines.footer_check import column_problem
from compactor.engines.local import LocalEngine
from compactor.errors import VerificationError


def _write(path: Path, table: pa.Table) -> str:
    pq.write_table(table, path)
    return str(path)


def test_a_file_that_predates_a_rename_is_refused_not_null_filled(tmp_path: Path) -> None:
    a = _write(tmp_path / "a.parquet", pa.table({"id": pa.array([1, 2], pa.int64())}))
    schema = pa.schema([("user_id", pa.int64())])
    job = BinJob((a,), str(tmp_path / "out.parquet"), str(tmp_path / "_stage"))
    with pytest.raises(VerificationError, match="holds column.s. id .* lacks user_id"):
        LocalEngine().rewrite([job], schema)


def test_a_column_added_later_is_null_for_older_files_and_verifies(tmp_path: Path) -> None:
    old = _write(tmp_path / "a.parquet", pa.table({"id": pa.array([1, 2], pa.int64())}))
    new = _write(tmp_path / "b.parquet", pa.table({"id": pa.array([3], pa.int64()), "v": pa.array(["x"])}))
    schema = pa.schema([("id", pa.int64()), ("v", pa.string())])
    (w,) = LocalEngine().rewrite([BinJob((old, new), str(tmp_path / "out.parquet"), str(tmp_path / "_s"))], schema)
    out = pq.read_table(w.location)
    assert out.column("v").to_pylist() == [None, None, "x"] and out.column("id").to_pylist() == [1, 2, 3]


def test_partition_columns_stored_in_files_are_dropped(tmp_path: Path) -> None:
    a = _write(tmp_path / "a.parquet", pa.table({"id": pa.array([1], pa.int64()), "date": ["2024-01-01"]}))
    schema = pa.schema([("id", pa.int64())])
    job = BinJob((a,), str(tmp_path / "out.parquet"), str(tmp_path / "_s"), partition_columns=("date",))
    (w,) = LocalEngine().rewrite([job], schema)
    assert pq.read_table(w.location).column_names == ["id"]


def test_column_problem_sees_nulls_and_values_a_row_count_does_not(tmp_path: Path) -> None:
    schema = pa.schema([("id", pa.int64()), ("v", pa.int64())])
    inp = pq.ParquetFile(_write(tmp_path / "i.parquet", pa.table({"id": [1, 2], "v": [5, 6]}, schema=schema)))
    nulls = pq.ParquetFile(_write(tmp_path / "n.parquet", pa.table({"id": [1, 2], "v": [None, None]}, schema=schema)))
    other = pq.ParquetFile(_write(tmp_path / "o.parquet", pa.table({"id": [1, 3], "v": [5, 6]}, schema=schema)))
    same = pq.ParquetFile(_write(tmp_path / "s.parquet", pa.table({"id": [2, 1], "v": [6, 5]}, schema=schema)))
    inputs = [(inp.metadata, inp.schema_arrow)]
    assert "column v: 2 null(s) written, the inputs hold 0" in column_problem(inputs, nulls.metadata, schema)
    assert "column id: min/max 1/3 written" in column_problem(inputs, other.metadata, schema)
    assert column_problem(inputs, same.metadata, schema) is None
    dropped = pa.schema([("id", pa.int64())])
    only_id = pq.ParquetFile(_write(tmp_path / "d.parquet", pa.table({"id": [1, 2]}, schema=dropped)))
    assert "column v of an input holds values" in column_problem(inputs, only_id.metadata, dropped)


def test_the_spark_engine_refuses_a_file_that_predates_a_rename(tmp_path: Path, spark) -> None:
    """The spark engine's reader fills a column its input lacks with nulls, like the local engine's
    conform: a file that holds `id` where the table now says `user_id` is refused before Spark reads it."""
    from compactor.engines.spark import SparkEngine
    from compactor.project.model import Target

    a = _write(tmp_path / "a.parquet", pa.table({"id": pa.array([1, 2], pa.int64())}))
    schema = pa.schema([("user_id", pa.int64())])
    job = BinJob((a,), str(tmp_path / "out.parquet"), str(tmp_path / "_stage"))
    with pytest.raises(VerificationError, match="holds column.s. id .* lacks user_id"):
        SparkEngine(Target(engine="spark")).rewrite([job], schema)
