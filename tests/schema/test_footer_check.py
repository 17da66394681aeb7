"""Per-column footer verification and the null-fill rule of the local rewrite (issue 18, finding 2)."""

from __future__ import annotations

from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from compactor.engines.base import BinJob, IgnoredColumn, inputs_at
from compactor.engines.footer_check import column_problem
from compactor.engines.local import LocalEngine
from compactor.errors import VerificationError


def _write(path: Path, table: pa.Table) -> str:
    pq.write_table(table, path)
    return str(path)


def test_a_file_that_predates_a_rename_is_refused_not_null_filled(tmp_path: Path) -> None:
    a = _write(tmp_path / "a.parquet", pa.table({"id": pa.array([1, 2], pa.int64())}))
    schema = pa.schema([("user_id", pa.int64())])
    job = BinJob(inputs_at(a), str(tmp_path / "out.parquet"), str(tmp_path / "_stage"))
    with pytest.raises(VerificationError, match="holds column.s. id .* lacks user_id"):
        LocalEngine().rewrite([job], schema)


def test_a_column_added_later_is_null_for_older_files_and_verifies(tmp_path: Path) -> None:
    old = _write(tmp_path / "a.parquet", pa.table({"id": pa.array([1, 2], pa.int64())}))
    new = _write(tmp_path / "b.parquet", pa.table({"id": pa.array([3], pa.int64()), "v": pa.array(["x"])}))
    schema = pa.schema([("id", pa.int64()), ("v", pa.string())])
    (w,) = LocalEngine().rewrite([BinJob(inputs_at(old, new), str(tmp_path / "out.parquet"), str(tmp_path / "_s"))], schema)
    out = pq.read_table(w.location)
    assert out.column("v").to_pylist() == [None, None, "x"] and out.column("id").to_pylist() == [1, 2, 3]


def test_partition_columns_stored_in_files_are_dropped(tmp_path: Path) -> None:
    a = _write(tmp_path / "a.parquet", pa.table({"id": pa.array([1], pa.int64()), "date": ["2024-01-01"]}))
    schema = pa.schema([("id", pa.int64())])
    job = BinJob(inputs_at(a), str(tmp_path / "out.parquet"), str(tmp_path / "_s"), partition_columns=("date",))
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
    job = BinJob(inputs_at(a), str(tmp_path / "out.parquet"), str(tmp_path / "_stage"))
    with pytest.raises(VerificationError, match="holds column.s. id .* lacks user_id"):
        SparkEngine(Target(engine="spark")).rewrite([job], schema)


CHANGE_DATA = (IgnoredColumn("_change_type"), IgnoredColumn("__is_cdc", False))


@pytest.mark.parametrize("engine", ["local", "spark"])
def test_change_data_bookkeeping_columns_are_dropped_once_the_footer_proves_them_empty(tmp_path: Path, engine: str,
                                                                                        request) -> None:
    """delta-spark's MERGE with change data feed on writes ``_change_type`` (null) and ``__is_cdc`` (false)
    into data files; readers ignore them, and so does the rewrite once each file's footer proves it."""
    a = _write(tmp_path / "a.parquet", pa.table({"id": pa.array([1, 2], pa.int64()),
                                                 "_change_type": pa.nulls(2, pa.string()),
                                                 "__is_cdc": pa.array([False, False])}))
    b = _write(tmp_path / "b.parquet", pa.table({"id": pa.array([3], pa.int64())}))
    schema = pa.schema([("id", pa.int64())])
    job = BinJob(inputs_at(a, b), str(tmp_path / "out.parquet"), str(tmp_path / "_s"), ignored=CHANGE_DATA)
    eng = LocalEngine() if engine == "local" else _spark_engine(request)
    (w,) = eng.rewrite([job], schema)
    out = pq.read_table(w.location)
    assert out.schema.names == ["id"] and out.column("id").to_pylist() == [1, 2, 3] and w.rows == w.rows_in == 3


def _spark_engine(request):
    request.getfixturevalue("spark")
    from compactor.engines.spark import SparkEngine
    from compactor.project.model import Target

    return SparkEngine(Target(engine="spark"))


@pytest.mark.parametrize(("columns", "why"), [
    ({"_change_type": pa.array(["insert", None])}, "holds 'insert'..'insert', not only null"),
    ({"__is_cdc": pa.array([False, True])}, "holds False..True, not only False"),
])
def test_a_bookkeeping_column_holding_data_is_refused(tmp_path: Path, columns, why: str) -> None:
    a = _write(tmp_path / "a.parquet", pa.table({"id": pa.array([1, 2], pa.int64()), **columns}))
    job = BinJob(inputs_at(a), str(tmp_path / "out.parquet"), str(tmp_path / "_s"), ignored=CHANGE_DATA)
    with pytest.raises(VerificationError, match=why.replace("(", r"\(").replace(".", r"\.")):
        LocalEngine().rewrite([job], pa.schema([("id", pa.int64())]))


def test_a_bookkeeping_column_without_statistics_is_refused(tmp_path: Path) -> None:
    path = tmp_path / "a.parquet"
    pq.write_table(pa.table({"id": pa.array([1], pa.int64()), "_change_type": pa.nulls(1, pa.string())}), path,
                   write_statistics=False)
    job = BinJob(inputs_at(str(path)), str(tmp_path / "out.parquet"), str(tmp_path / "_s"), ignored=CHANGE_DATA)
    with pytest.raises(VerificationError, match="no statistics to prove"):
        LocalEngine().rewrite([job], pa.schema([("id", pa.int64())]))
