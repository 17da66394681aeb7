"""The local engine on real tables: null partitions, sort, z-order (delta-rs), vacuum, properties, refusals."""

from __future__ import annotations

import shutil
from collections import Counter
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from deltalake import DeltaTable, write_deltalake

from compactor.formats.delta.plan.actions import SetPropertiesAction, VacuumAction
from compactor.formats.delta.read.vacuum_listing import vacuum_candidates
from compactor.formats.delta.run import partition_filters
from compactor.models.table import TableLocation
from compactor.planning.actions import (
    Action,
    CompactAction,
    Precondition,
    SortAction,
    ZOrderAction,
)
from compactor.planning.plan import Plan, TablePlan
from compactor.project.model import Target
from compactor.tasks.apply import apply_plan
from tests.apply.helpers import exactly_once, make_table, plan_for


def _live(t: Path) -> list[dict]:
    return pa.table(DeltaTable(str(t)).get_add_actions(flatten=True)).to_pylist()


def _plan(t: Path, *actions: Action, partition_columns: tuple[str, ...] = ()) -> Plan:
    table = TablePlan(name="t", path=str(t), format="delta", engine="local", version=DeltaTable(str(t)).version(),
                      partition_columns=partition_columns, actions=actions)
    return Plan(compactor_version="test", generated_at="2026-01-01T00:00:00Z", project="tests",
                target={"engine": "local"}, tables=(table,))


def test_null_partition_is_compacted(tmp_path: Path) -> None:
    """A null partition value lives in __HIVE_DEFAULT_PARTITION__; delta-rs needs "" in the filter."""
    t = tmp_path / "t"
    for i in range(5):
        write_deltalake(str(t), pa.table({"p": pa.array([None, "a"], pa.string()), "id": pa.array([2 * i, 2 * i + 1])}),
                        partition_by=["p"], mode="append")
    assert partition_filters({"p": None}) == [("p", "=", "")]
    plan = plan_for(t)
    null_actions = [a for a in plan.tables[0].actions if a.partition == {"p": None}]
    assert null_actions, plan.tables[0]
    run = apply_plan(plan, target=Target())
    assert run.ok, [r.error for r in run.results]
    by_part = Counter(f["partition.p"] for f in _live(t))
    assert by_part == {None: 1, "a": 1}
    exactly_once(t, 10)


def test_z_order_rewrites_the_partition_and_keeps_rows(tmp_path: Path) -> None:
    t = tmp_path / "t"
    n = make_table(t, partitions=2, appends=4)
    files = tuple(f["path"] for f in _live(t) if f["partition.date"] == "2024-01-01")
    action = ZOrderAction(partition={"date": "2024-01-01"}, input_files=len(files),
                          precondition=Precondition.of(DeltaTable(str(t)).version(), files), bins=(files,),
                          z_order_by=("id",), target_file_size=2**20, min_file_size=2**19)
    run = apply_plan(_plan(t, action, partition_columns=("date",)), target=Target())
    (r,) = run.results
    assert r.status == "success", r.error
    assert r.files_removed == 4 and r.files_added == 1 and r.rows_before == r.rows_after == 200
    exactly_once(t, n)


def test_vacuum_dry_run_lists_files_and_real_run_deletes_only_removed_files(tmp_path: Path) -> None:
    t = tmp_path / "t"
    n = make_table(t, partitions=1, appends=5)
    DeltaTable(str(t)).alter.set_table_properties({"delta.deletedFileRetentionDuration": "interval 0 hours"})
    DeltaTable(str(t)).optimize.compact()
    removed = {f for f in (p.name for p in (t / "date=2024-01-01").glob("*.parquet"))} - {
        Path(f["path"]).name for f in _live(t)}
    assert len(removed) == 5
    listed = vacuum_candidates(TableLocation(str(t)), 0)  # as the plan lists them (dry_run_first)
    assert listed is not None and {Path(f).name for f in listed} == removed
    vacuum = VacuumAction(retention_hours=0, files=listed, files_to_delete=len(listed),
                          precondition=Precondition.of(None, listed))
    run = apply_plan(_plan(t, vacuum), target=Target(), dry_run=True)
    (r,) = run.results
    assert r.status == "skipped" and r.details.file_count == 5
    assert {Path(f).name for f in r.details.files} == removed
    assert len(list((t / "date=2024-01-01").glob("*.parquet"))) == 6  # nothing deleted
    run = apply_plan(_plan(t, vacuum), target=Target())
    assert run.ok and run.results[0].files_removed == 5
    assert len(list((t / "date=2024-01-01").glob("*.parquet"))) == 1
    exactly_once(t, n)


def test_vacuum_never_goes_below_the_tables_retention(tmp_path: Path) -> None:
    t = tmp_path / "t"
    make_table(t, partitions=1, appends=3)
    DeltaTable(str(t)).optimize.compact()
    before = sorted(p.name for p in (t / "date=2024-01-01").glob("*.parquet"))
    run = apply_plan(_plan(t, VacuumAction(retention_hours=1, precondition=Precondition.of(None, ()))), target=Target())
    (r,) = run.results
    assert r.status == "error" and "below the table's delta.deletedFileRetentionDuration (168h)" in r.error
    assert sorted(p.name for p in (t / "date=2024-01-01").glob("*.parquet")) == before


def test_set_properties(tmp_path: Path) -> None:
    t = tmp_path / "t"
    make_table(t, partitions=1, appends=1)
    props = {"delta.deletedFileRetentionDuration": "interval 14 days", "delta.logRetentionDuration": "interval 60 days"}
    run = apply_plan(_plan(t, SetPropertiesAction(properties=props, precondition=Precondition.of(None, ()))), target=Target())
    assert run.ok, run.results[0].error
    conf = DeltaTable(str(t)).metadata().configuration
    assert {k: conf[k] for k in props} == props


def _rows_of_live_files(t: Path) -> Counter[tuple]:
    """The rows of the live files (no deletion vectors here; delta-rs' reader refuses v2Checkpoint tables), the
    timestamps as instants (Spark wrote INT96, read as naive nanoseconds; a rewrite writes them UTC-adjusted)."""
    def instants(table: pa.Table) -> pa.Table:
        return table.set_column(table.schema.get_field_index("created_at"), "created_at",
                                table.column("created_at").cast(pa.timestamp("us", "UTC")))

    return Counter(tuple(sorted(r.items())) for f in _live(t)
                   for r in instants(pq.read_table(t / f["path"])).to_pylist())


def test_a_feature_compactors_commit_honours_compacts_and_one_it_cannot_is_refused_naming_it(tmp_path: Path,
                                                                                           fixtures_dir: Path) -> None:
    """identityColumns and v2Checkpoint (delta-rs' fixture) ask nothing of a dataChange=false swap: compactor's
    own commit compacts the table, the same rows after. rowTracking (named by a protocol commit on a copy) is
    refused naming it, nothing committed."""
    import json

    for feature in (None, "rowTracking"):
        t = tmp_path / str(feature)
        shutil.copytree(fixtures_dir / "delta-rs" / "checkpoint-v2-table", t)
        before = DeltaTable(str(t)).version()
        if feature:
            proto = DeltaTable(str(t)).protocol()
            (t / "_delta_log" / f"{before + 1:020d}.json").write_text(json.dumps({"protocol": {
                "minReaderVersion": 3, "minWriterVersion": 7, "readerFeatures": list(proto.reader_features or ()),
                "writerFeatures": [*(proto.writer_features or ()), "domainMetadata", feature]}}) + "\n")
            before += 1
        files = tuple(f["path"] for f in _live(t))
        data = _rows_of_live_files(t)
        action = CompactAction(input_files=len(files), bins=(files,), precondition=Precondition.of(before, files),
                               target_file_size=2**20, min_file_size=2**19)
        (r,) = apply_plan(_plan(t, action), target=Target()).results
        if feature:
            assert r.status == "error" and feature in (r.error or ""), r.error
            assert DeltaTable(str(t)).version() == before
        else:
            assert r.status == "success", r.error
            assert len(_live(t)) == 1 and DeltaTable(str(t)).version() == before + 1
        assert _rows_of_live_files(t) == data and sum(data.values()) > 0


def test_sort_strategy_writes_sorted_files(tmp_path: Path) -> None:
    t = tmp_path / "t"
    n = make_table(t, partitions=1, appends=4)
    files = tuple(f["path"] for f in _live(t))
    action = SortAction(partition={"date": "2024-01-01"}, input_files=len(files), bins=(files,),
                        precondition=Precondition.of(DeltaTable(str(t)).version(), files), sort_by=("id",),
                        target_file_size=2**20, min_file_size=2**19)
    (r,) = apply_plan(_plan(t, action, partition_columns=("date",)), target=Target()).results
    assert r.status == "success", r.error
    (out,) = DeltaTable(str(t)).file_uris()
    ids = pq.read_table(out).column("id").to_pylist()
    assert ids == sorted(ids) and len(ids) == n
    exactly_once(t, n)


def test_inputs_above_the_whole_file_size_are_decoded_from_the_file(tmp_path: Path, monkeypatch) -> None:
    """Small inputs are read whole into memory (one read); larger ones are decoded from the file. Both
    paths rewrite the same rows: here every input takes the file path."""
    from compactor.engines import local

    opened: list[str] = []
    real = local._open

    def parquet_file(source):  # records which source each input got; reads with the real reader
        opened.append("memory" if isinstance(source, pa.BufferReader) else "file")
        return real(source)

    t = tmp_path / "t"
    n = make_table(t, partitions=2, appends=4)
    monkeypatch.setattr(local, "_open", parquet_file)
    monkeypatch.setattr(local, "WHOLE_FILE_BYTES", 0)
    run = apply_plan(plan_for(t), target=Target())
    assert run.ok, [r.error for r in run.results]
    assert opened.count("file") >= 8 and "memory" not in opened, opened
    exactly_once(t, n)
    assert len(_live(t)) == 2

    opened.clear()
    monkeypatch.setattr(local, "WHOLE_FILE_BYTES", 64 << 20)
    make_table(t, partitions=2, appends=3, start=n)
    plan = plan_for(t)
    inputs = sum(len(a.input_paths) for a in plan.tables[0].actions)
    run = apply_plan(plan, target=Target())
    assert run.ok and opened.count("memory") == inputs == 8, opened
    exactly_once(t, n + 300)


@pytest.mark.skipif(not hasattr(__import__("os"), "mkfifo"), reason="no named pipes on this platform")
def test_a_whole_file_read_that_comes_short_reads_to_the_end(tmp_path: Path) -> None:
    """An input is read whole with one read of its size (local._local_source). Where the bytes come short
    (some network file systems; here a named pipe, whose size says 0 and whose bytes come later), the read
    goes on to the end: the reader gets the whole file, not a cut one."""
    import os
    import threading

    from compactor.engines import local

    src = tmp_path / "in.parquet"
    pq.write_table(pa.table({"id": list(range(5000)), "s": [str(i) * 3 for i in range(5000)]}), src)
    body = src.read_bytes()
    pipe = tmp_path / "pipe.parquet"
    os.mkfifo(pipe)

    def feed() -> None:
        with open(pipe, "wb") as w:
            for k in range(0, len(body), 4096):
                w.write(body[k:k + 4096])
                w.flush()

    writer = threading.Thread(target=feed)
    writer.start()
    source, held = local._local_source(str(pipe))
    writer.join()
    assert held == len(body)
    assert local._open(source).read_all().equals(pq.read_table(src))


def test_the_lean_reader_decodes_as_parquet_file_does(tmp_path: Path) -> None:
    """The local engine opens inputs with the reader pq.ParquetFile wraps (local._open): the same footer,
    the same Arrow schema (UUID and JSON columns of a file without an Arrow schema decoded as extension
    types, as ParquetFile decodes them) and the same rows."""
    from compactor.engines import local

    table = pa.table({
        "u": pa.array([b"\x01" * 16, None], pa.uuid()),
        "j": pa.array(['{"a": 1}', None], pa.json_()),
        "ts": pa.array([1, 2], pa.timestamp("us", tz="UTC")),
        "d": pa.array([1, None], pa.decimal128(12, 2)),
        "s": pa.array([{"x": 1}, None], pa.struct([("x", pa.int32())])),
    })
    path = tmp_path / "f.parquet"
    pq.write_table(table, path, store_schema=False)  # as Spark writes: no Arrow schema, only parquet's types
    wrapped = pq.ParquetFile(path)
    for source in (pa.BufferReader(path.read_bytes()), str(path)):
        reader = local._open(source)
        assert reader.schema_arrow == wrapped.schema_arrow and isinstance(reader.schema_arrow.field("u").type,
                                                                          pa.UuidType)
        assert reader.metadata.equals(wrapped.metadata)
        assert reader.read_all(use_threads=False).equals(wrapped.read())


def test_batched_local_inputs_give_what_file_by_file_reads_give(tmp_path: Path, monkeypatch) -> None:
    """A bin's local inputs are read in batches (local._local_inputs): every file once, in order, with the
    footer and rows a file-by-file read gives, whatever the batch limits; an unreadable input in the middle
    of a batch fails the bin naming that input."""
    from compactor.engines import local
    from compactor.engines.base import BinInput, BinJob, inputs_at
    from compactor.errors import ApplyError

    schema = pa.schema([("id", pa.int64()), ("v", pa.string())])
    inputs = []
    for i in range(37):
        path = tmp_path / f"f{i:02d}.parquet"
        pq.write_table(pa.table({"id": pa.array(range(i * 3, i * 3 + 3), pa.int64()), "v": ["a", None, str(i)]}),
                       path)
        inputs.append(str(path))
    job = BinJob(inputs_at(*inputs), str(tmp_path / "out.parquet"), str(tmp_path / "_staging"))
    engine = local.LocalEngine(threads=1)
    expected = [engine._read(BinInput(x), schema, job) for x in inputs]
    for files, size in ((16, 16 << 20), (5, 16 << 20), (16, 1), (1, 16 << 20)):
        monkeypatch.setattr(local, "BATCH_FILES", files)
        monkeypatch.setattr(local, "BATCH_BYTES", size)
        got = list(local._local_inputs(job, schema))
        assert len(got) == len(expected)
        for (rows, table, (md, sch)), (rows_e, table_e, (md_e, sch_e)) in zip(got, expected):
            assert rows == rows_e and table.equals(table_e) and md.equals(md_e) and sch == sch_e

    monkeypatch.setattr(local, "BATCH_FILES", 16)
    monkeypatch.setattr(local, "BATCH_BYTES", 16 << 20)
    Path(inputs[20]).write_bytes(b"not parquet at all")
    with pytest.raises(ApplyError, match=r"cannot read .*f20\.parquet"):
        list(local._local_inputs(job, schema))
