"""Rows an input no longer holds (BinInput.drop: what a deletion vector or a position delete removes) are
left out of the rewrite by their position in the file, on both engines: the local engine by position
within the file, the spark engine through Spark's ``_metadata.row_index`` (in a commit group's one job
and in a job per bin). Rows out == rows in - rows dropped; column by column, the bounds that still hold
once rows are dropped (engines/footer_check.py)."""

from __future__ import annotations

from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from compactor.engines.base import BinInput, BinJob, WrittenFile, inputs_at
from compactor.engines.footer_check import column_problem
from compactor.engines.local import LocalEngine
from compactor.errors import VerificationError
from compactor.formats.delta.apply.rewrite import verify_footers
from compactor.project.model import Target

SCHEMA = pa.schema([("id", pa.int64()), ("v", pa.string()), ("n", pa.int32())])


def _write(path: Path, ids: range, row_group_size: int = 3) -> str:
    """A file of ``ids`` (several row groups: a position counts over all of them); ``n`` is null for every
    third id, ``v`` holds the id as text."""
    table = pa.table({"id": pa.array(list(ids), pa.int64()), "v": [f"v{i}" for i in ids],
                      "n": pa.array([None if i % 3 == 0 else i for i in ids], pa.int32())}, schema=SCHEMA)
    pq.write_table(table, path, row_group_size=row_group_size)
    return str(path)


def _ids(w: WrittenFile) -> list[int]:
    return sorted(pq.read_table(w.location).column("id").to_pylist())


def _engine(kind: str, threads: int | None = None):
    if kind == "local":
        return LocalEngine(threads=threads)
    from compactor.engines.spark import SparkEngine

    return SparkEngine(Target(engine="spark", threads=threads))


def _bins(tmp_path: Path) -> tuple[list[BinJob], list[list[int]]]:
    """Three bins: one dropping some rows of one file, all rows of another and none of a third; one dropping
    nothing; one whose every row is dropped. With the ids each output must hold."""
    a = _write(tmp_path / "a.parquet", range(0, 10))
    b = _write(tmp_path / "b.parquet", range(100, 105))
    c = _write(tmp_path / "c.parquet", range(200, 207))
    d = _write(tmp_path / "d.parquet", range(300, 304))
    e = _write(tmp_path / "e.parquet", range(400, 406))
    f = _write(tmp_path / "f.parquet", range(500, 502))
    mixed = BinJob((BinInput(a, frozenset({0, 3, 9})), BinInput(b, frozenset(range(5))), BinInput(c)),
                   str(tmp_path / "out0.parquet"), str(tmp_path / "_compactor_staging_0"))
    kept = BinJob(inputs_at(d, e), str(tmp_path / "out1.parquet"), str(tmp_path / "_compactor_staging_1"))
    gone = BinJob((BinInput(f, frozenset({0, 1})),), str(tmp_path / "out2.parquet"),
                  str(tmp_path / "_compactor_staging_2"))
    expected = [[1, 2, 4, 5, 6, 7, 8, *range(200, 207)], [*range(300, 304), *range(400, 406)], []]
    return [mixed, kept, gone], expected


def _check(written: list[WrittenFile], expected: list[list[int]]) -> None:
    assert [_ids(w) for w in written] == expected
    assert [(w.rows_in, w.rows_dropped, w.rows) for w in written] == [(22, 8, 14), (10, 0, 10), (2, 2, 0)]
    assert all(w.rows == w.rows_kept == w.facts.rows for w in written)
    verify_footers([["a", "b", "c"], ["d", "e"], ["f"]], written)
    n = next(c for c in written[0].facts.columns if c.path == ("n",))
    assert (n.nulls, n.min, n.max) == (3, 1, 206)  # null for ids 6, 201, 204 (not for the dropped 0, 3, 9, 102)


@pytest.mark.parametrize("threads, processes", [(1, False), (2, False), (2, True)],
                         ids=["one-thread", "threads", "worker-processes"])
def test_the_local_engine_leaves_out_the_dropped_rows(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                                      threads: int, processes: bool) -> None:
    from compactor.engines import local, worker_processes

    if processes:
        if not worker_processes.available():
            pytest.skip("no worker processes on this platform")
        monkeypatch.setattr(local, "PROCESS_MIN_FILES", 1)
    jobs, expected = _bins(tmp_path)
    written = LocalEngine(threads=threads).rewrite(jobs, SCHEMA)
    _check(written, expected)
    # the order of the kept rows is the inputs' own
    assert pq.read_table(written[0].location).column("id").to_pylist() == expected[0]


def test_the_local_engine_leaves_out_dropped_rows_of_a_sort_bin(tmp_path: Path) -> None:
    a = _write(tmp_path / "a.parquet", range(9, -1, -1))
    job = BinJob((BinInput(a, frozenset({0, 5})),), str(tmp_path / "out.parquet"), str(tmp_path / "_s"),
                 sort_by=("id",))
    (w,) = LocalEngine().rewrite([job], SCHEMA)
    assert pq.read_table(w.location).column("id").to_pylist() == [0, 1, 2, 3, 5, 6, 7, 8]


@pytest.mark.spark
@pytest.mark.parametrize("threads", [None, 1], ids=["one-job", "job-per-bin"])
def test_the_spark_engine_leaves_out_the_dropped_rows(spark, tmp_path: Path, threads: int | None) -> None:
    jobs, expected = _bins(tmp_path)
    written = _engine("spark", threads).rewrite(jobs, SCHEMA)
    _check(written, expected)
    assert not list(tmp_path.glob("_compactor_staging_*")), "a staging folder was left"


@pytest.mark.spark
def test_the_spark_engine_drops_by_position_when_the_table_has_a_metadata_column(spark, tmp_path: Path) -> None:
    """A table column named ``_metadata`` hides Spark's by that name; the position is read all the same."""
    schema = pa.schema([("id", pa.int64()), ("_metadata", pa.int64())])
    path = tmp_path / "a.parquet"
    pq.write_table(pa.table({"id": list(range(6)), "_metadata": [7] * 6}, schema=schema), path, row_group_size=2)
    job = BinJob((BinInput(str(path), frozenset({1, 4})),), str(tmp_path / "out.parquet"), str(tmp_path / "_s"))
    (w,) = _engine("spark").rewrite([job], schema)
    assert _ids(w) == [0, 2, 3, 5] and w.rows == w.rows_kept == 4


@pytest.mark.parametrize("kind", ["local", pytest.param("spark", marks=pytest.mark.spark)])
def test_a_position_the_file_does_not_have_fails_verification(request, tmp_path: Path, kind: str) -> None:
    """Dropping a row the file does not have leaves every row: the output holds one more than expected."""
    if kind == "spark":
        request.getfixturevalue("spark")
    a = _write(tmp_path / "a.parquet", range(4))
    job = BinJob((BinInput(a, frozenset({1, 4})),), str(tmp_path / "out.parquet"), str(tmp_path / "_s"))
    (w,) = _engine(kind).rewrite([job], SCHEMA)
    assert (w.rows, w.rows_kept) == (3, 2)
    with pytest.raises(VerificationError, match=r"wrote 3 rows, the inputs hold 2 \(4 less 2 dropped\)"):
        verify_footers([["a"]], [w])


def _footer(tmp_path: Path, name: str, ids: list[int | None], n: list[int | None]) -> tuple[pq.FileMetaData, pa.Schema]:
    schema = pa.schema([("id", pa.int64()), ("n", pa.int32())])
    pq.write_table(pa.table({"id": pa.array(ids, pa.int64()), "n": pa.array(n, pa.int32())}, schema=schema),
                   tmp_path / name)
    pf = pq.ParquetFile(tmp_path / name)
    return pf.metadata, pf.schema_arrow


def test_column_bounds_once_rows_are_dropped(tmp_path: Path) -> None:
    """Where rows are dropped a footer cannot tell which values went: nulls between the inputs' less the
    rows dropped and the inputs', values within the inputs' and reaching those of an input that drops none."""
    first = _footer(tmp_path, "i0.parquet", [1, 5, 9, 12], [None, None, 3, 4])  # drops 2 rows
    second = _footer(tmp_path, "i1.parquet", [20, 30], [None, 7])  # drops none
    inputs, dropped = [first, second], [2, 0]

    def problem(ids: list[int | None], n: list[int | None]) -> str | None:
        md, schema = _footer(tmp_path, "out.parquet", ids, n)
        return column_problem(inputs, md, schema, dropped)

    assert problem([1, 9, 20, 30], [None, 3, None, 7]) is None
    assert problem([5, 12, 20, 30], [3, 4, None, 7]) is None  # both dropped rows held nulls
    assert problem([1, 5, 20, 30], [None, None, None, 7]) is None  # both dropped rows held values
    assert "4 null(s) written, the inputs hold 1 to 3 once rows are dropped" in problem(
        [1, 5, 20, 30], [None, None, None, None])
    assert "min/max 0/30 written" in problem([0, 5, 20, 30], [None, None, None, 7])  # a value no input holds
    assert "min/max 1/20 written" in problem([1, 5, 9, 20], [None, None, None, 7])  # the kept 30 is missing
    # where nothing is dropped, exactly as before: the same nulls and the same min and max
    assert "the inputs hold 1/30" in column_problem(inputs, _footer(tmp_path, "o.parquet", [1, 5, 9, 12, 20, 20],
                                                                    [None, None, 3, 4, None, 7])[0],
                                                    first[1], [0, 0])


@pytest.mark.spark
def test_a_group_of_many_files_that_drop_rows_is_one_scan(spark, tmp_path: Path) -> None:
    """Four bins of five files, each dropping rows: one scan of the twenty files anti-joined with the dropped
    positions (two jobs: one collects them for the broadcast, one writes), not a read per file (the code
    before read each such file alone: twenty scans in the plan)."""
    from pyspark.sql.pandas.types import from_arrow_schema

    files = [_write(tmp_path / f"f{i:02d}.parquet", range(100 * i, 100 * i + 9)) for i in range(20)]
    jobs = [BinJob(tuple(BinInput(f, frozenset({0, 4})) for f in files[5 * b:5 * b + 5]),
                   str(tmp_path / f"out{b}.parquet"), str(tmp_path / f"_compactor_staging_{b}")) for b in range(4)]
    engine = _engine("spark")
    frame = engine._group_frame(jobs, from_arrow_schema(SCHEMA))
    assert frame._jdf.queryExecution().executedPlan().toString().count("FileScan parquet") == 1
    tracker = spark.sparkContext.statusTracker()
    before = set(tracker.getJobIdsForGroup())
    written = engine.rewrite(jobs, SCHEMA)
    assert len(set(tracker.getJobIdsForGroup()) - before) == 2
    assert [_ids(w) for w in written] == [
        sorted(i for f in range(5 * b, 5 * b + 5) for i in range(100 * f + 1, 100 * f + 9) if i != 100 * f + 4)
        for b in range(4)]
    verify_footers([files[5 * b:5 * b + 5] for b in range(4)], written)
