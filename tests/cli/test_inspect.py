"""`compactor inspect` on a Delta table, a file-sink output and a streaming checkpoint."""

from __future__ import annotations

import json
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
from click.testing import CliRunner

from compactor.cli import cli as main
from compactor.formats.file_sink.inspection import InspectSettings, SinkLogSettings
from compactor.tasks.inspect import inspect_path


def make_sink(root: Path, batches: int = 7, interval: int = 3) -> None:
    """A file-sink output in Spark's exact layout: one parquet per partition per batch, logs 0..N."""
    meta = root / "_spark_metadata"
    meta.mkdir(parents=True)
    listed: list[str] = []
    for b in range(batches):
        new = []
        for part in (0, 1):
            f = root / f"part={part}" / f"part-{b:05d}-x.c000.snappy.parquet"
            f.parent.mkdir(exist_ok=True)
            pq.write_table(pa.table({"id": [b * 10 + i for i in range(5)]}), f)
            new.append(json.dumps({"path": f.as_uri(), "size": f.stat().st_size, "isDir": False,
                                   "modificationTime": 1, "blockReplication": 1, "blockSize": 1, "action": "add"}))
        listed += new
        compact = (b + 1) % interval == 0
        (meta / (f"{b}.compact" if compact else str(b))).write_text("v1\n" + "\n".join(listed if compact else new))


def test_inspect_sink_json_and_text(tmp_path: Path) -> None:
    make_sink(tmp_path / "s")
    r = inspect_path(str(tmp_path / "s"), settings=InspectSettings(sink=SinkLogSettings(compact_interval=10)))
    assert r.kind == "spark_file_sink" and r.file_count == 14 and r.small_file_share == 1.0
    assert [p.partition for p in r.partitions] == ["part=0", "part=1"]
    assert r.partitions[0].histogram["<1MB"] == 7
    lh = r.logs[0]
    assert (lh.latest_compact, lh.compact_interval, lh.entries, lh.latest_batch) == ("5.compact", 3, 12, 6)
    assert lh.growth_bytes_per_batch > 0
    assert any("compact interval 3 differs" in x for x in r.recommendations)
    res = CliRunner().invoke(main, ["inspect", str(tmp_path / "s"), "--format", "json"])
    assert res.exit_code == 0, res.output
    assert json.loads(res.output)["logs"][0]["entries"] == 12
    res = CliRunner().invoke(main, ["inspect", str(tmp_path / "s")])
    assert res.exit_code == 0 and "part=1: 7 file(s)" in res.output and "#" in res.output


def test_inspect_delta_and_checkpoint(tmp_path: Path) -> None:
    from deltalake import write_deltalake

    for i in range(3):
        write_deltalake(str(tmp_path / "d"), pa.table({"k": ["a", "b"], "v": [i, i]}), partition_by=["k"], mode="append")
    r = inspect_path(str(tmp_path / "d"))
    assert r.kind == "delta" and r.file_count == 6 and len(r.partitions) == 2
    cp = tmp_path / "cp"
    (cp / "sources" / "0").mkdir(parents=True)
    (cp / "offsets").mkdir()
    (cp / "offsets" / "0").write_text("v1\n{}\n0")
    (cp / "sources" / "0" / "0").write_text('v1\n{"path":"file:///in/a.json","timestamp":1,"batchId":0}')
    r = inspect_path(str(cp))
    assert r.kind == "checkpoint" and r.logs[0].entries == 1
    assert any("maxFileAge" in x and "cleanSource" in x for x in r.recommendations)


def test_inspect_unknown_path_exits_with_clear_error(tmp_path: Path) -> None:
    res = CliRunner().invoke(main, ["inspect", str(tmp_path)])
    assert res.exit_code != 0 and "not a Delta table" in res.output


def test_inspect_compares_with_a_project_policy(tmp_path: Path) -> None:
    import shutil

    import compactor

    proj = tmp_path / "p"
    shutil.copytree(Path(compactor.__file__).parent / "example_project", proj)
    make_sink(tmp_path / "s", batches=5, interval=2)  # the example policy asks for interval 3
    res = CliRunner().invoke(main, ["inspect", str(tmp_path / "s"), "--project-dir", str(proj),
                                    "--table", "clicks_sink", "--format", "json"])
    assert res.exit_code == 0, res.output
    data = json.loads(res.output)
    assert data["policy"]["compact_interval"] == 3
    assert any("compact interval 2 differs" in r for r in data["recommendations"])
    res = CliRunner().invoke(main, ["inspect", str(tmp_path / "s"), "--project-dir", str(proj), "--table", "nope"])
    assert res.exit_code == 2 and "nope" in res.output


def test_inspect_compares_with_the_policy(tmp_path: Path) -> None:
    import compactor

    make_sink(tmp_path / "s", interval=2)
    example = Path(compactor.__file__).parent / "example_project"
    res = CliRunner().invoke(main, ["inspect", str(tmp_path / "s"), "--format", "json", "--project-dir",
                                    str(example), "--table", "clicks_sink"])
    assert res.exit_code == 0, res.output
    data = json.loads(res.output)
    assert data["policy"]["compact_interval"] == 3 and data["logs"][0]["compact_interval"] == 2
    assert any("differs from the policy's 3" in x for x in data["recommendations"])
    res = CliRunner().invoke(main, ["inspect", str(tmp_path / "s"), "--project-dir", str(example),
                                    "--table", "nope"])
    assert res.exit_code == 2 and "not declared" in res.output
