"""The metadata-log readers on Spark's own fixture logs and on hand-made edge cases."""

from __future__ import annotations

from pathlib import Path

import pytest

from compactor.errors import TableReadError
from compactor.formats.file_sink.log import (
    _SINK_SCHEMA,
    list_log,
    read_entries_table,
    sink_entries_table,
    source_entries_table,
)
from compactor.formats.file_sink.state import read_sink_state

FIX = Path("/work/shared/fixtures/spark/structured-streaming")


def test_spark_210_sink_log() -> None:
    log = list_log(FIX / "file-sink-log-version-2.1.0")
    assert log.latest_batch == 9 and log.latest_compact.batch == 7
    assert log.compact_interval() == 8  # one .compact: (7 + 1)
    assert [f.batch for f in log.visible_files()] == [7, 8, 9]
    t = sink_entries_table(log)
    paths = t.column("raw_path").to_pylist()
    assert len(paths) == len(set(paths)) == 10  # 8 compacted + /a/b/8 + /a/b/9 (the delete of /a/b/0 dedups)
    assert t.column("in_compact").to_pylist().count(True) == 8
    assert t.column("action").to_pylist().count("delete") == 0  # /a/b/0 first listed as add in 7.compact


def test_unparsable_names_ignored_and_interval_from_two_newest(tmp_path: Path) -> None:
    d = tmp_path / "_spark_metadata"
    d.mkdir()
    line = '{"path":"file:///x/a%20b/p.parquet","size":5,"isDir":false,"modificationTime":1,"action":"add"}'
    for name in ("2.compact", "5.compact", "6", "7"):
        (d / name).write_text("v1\n" + line.replace("p.parquet", f"{name}.parquet"))
    for junk in (".5.compact.crc", "8.tmp", "abc", ".7.crc"):
        (d / junk).write_text("junk")
    log = list_log(d)
    assert log.latest_batch == 7 and log.compact_interval() == 3
    assert [f.name for f in (lf.path for lf in log.visible_files())] == ["5.compact", "6", "7"]
    assert sink_entries_table(log).column("raw_path").to_pylist()[0] == "file:///x/a%20b/5.compact.parquet"


def test_empty_log_file_is_incomplete(tmp_path: Path) -> None:
    (tmp_path / "0").write_text("")
    with pytest.raises(TableReadError, match="incomplete log file"):
        read_entries_table(tmp_path / "0", _SINK_SCHEMA)
    (tmp_path / "1").write_text("garbage\n{}")
    with pytest.raises(TableReadError, match="not a metadata log"):
        read_entries_table(tmp_path / "1", _SINK_SCHEMA)


def test_source_log_columns(tmp_path: Path) -> None:
    d = tmp_path / "sources" / "0"
    d.mkdir(parents=True)
    (d / "1.compact").write_text('v1\n{"path":"file:///in/a.json","timestamp":10,"batchId":0}\n'
                                 '{"path":"file:///in/b.json","timestamp":11,"batchId":1}')
    (d / "2").write_text('v1\n{"path":"file:///in/c.json","timestamp":12,"batchId":2}')
    t = source_entries_table(list_log(d))
    assert t.column("batchId").to_pylist() == [0, 1, 2] and t.num_rows == 3


def test_large_manifest_reads_every_entry(tmp_path: Path) -> None:
    # speed is measured in bench/ (a timed assertion here would only measure the machine's load)
    out = tmp_path / "out"
    (out / "_spark_metadata").mkdir(parents=True)
    n = 300_000
    lines = (f'{{"path":"file://{out}/k={i % 50}/part-{i}.parquet","size":{i},"isDir":false,'
             f'"modificationTime":{i},"blockReplication":1,"blockSize":1,"action":"add"}}' for i in range(n))
    (out / "_spark_metadata" / "9.compact").write_text("v1\n" + "\n".join(lines))
    state = read_sink_state(str(out))
    assert state.file_count == n and state.partition_columns == ("k",)
    sizes = state.files.column("size_bytes").to_pylist()
    assert sizes[:3] == [0, 1, 2] and sizes[-1] == n - 1
    assert state.files.column("partition.k").to_pylist()[:51] == [str(i % 50) for i in range(51)]


def test_not_a_sink(tmp_path: Path) -> None:
    with pytest.raises(TableReadError, match="_spark_metadata"):
        read_sink_state(str(tmp_path))
