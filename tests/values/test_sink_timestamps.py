"""Spark's INT96 timestamps keep their meaning when compactor rewrites a file sink (finding 8)."""

from __future__ import annotations

import datetime as dt
import json
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq

from compactor.project.model import Target
from compactor.tasks.apply import apply_plan
from tests.sink.helpers import sink_plan

INSTANT = dt.datetime(2024, 3, 31, 1, 30, 0, 123456, tzinfo=dt.UTC)


def _sink(root: Path, batches: int = 4) -> None:
    """A file sink as Spark writes it by default: timestamps as INT96 (UTC instants); compact interval
    2, so batch 3 is ``3.compact`` listing every file."""
    meta = root / "_spark_metadata"
    meta.mkdir(parents=True)
    listed = []
    for b in range(batches):
        f = root / f"part-{b:05d}-0.c000.snappy.parquet"
        ts = pa.array([INSTANT + dt.timedelta(hours=b)], pa.timestamp("us", tz="UTC"))
        pq.write_table(pa.table({"id": [b], "ts": ts}), f, use_deprecated_int96_timestamps=True)
        entry = {"path": f.as_uri(), "size": f.stat().st_size, "isDir": False, "modificationTime": 1,
                 "blockReplication": 1, "blockSize": 1, "action": "add"}
        listed.append(json.dumps(entry))
        compact = (b + 1) % 2 == 0
        (meta / (f"{b}.compact" if compact else str(b))).write_text("v1\n" + "\n".join(listed if compact
                                                                                    else listed[-1:]))


def test_finding_8_int96_preserved(tmp_path: Path) -> None:
    """The rewrite wrote INT96 instants back as timezone-less timestamps: Spark reads those as
    TIMESTAMP_NTZ, another type with wall-clock meaning."""
    out = tmp_path / "sink"
    _sink(out)
    assert pq.ParquetFile(next(out.glob("*.parquet"))).metadata.schema.column(1).physical_type == "INT96"
    run = apply_plan(sink_plan(out, engine="local"), target=Target(), watch_s=0)
    assert run.ok, [(r.status, r.error) for r in run.results]
    (new,) = out.glob("*compactor*.parquet")
    pf = pq.ParquetFile(new)
    logical = pf.metadata.schema.column(1).logical_type
    assert logical.type == "TIMESTAMP" and json.loads(logical.to_json())["isAdjustedToUTC"] is True
    got = sorted(pf.read().column("ts").to_pylist())
    assert got == [INSTANT + dt.timedelta(hours=b) for b in range(4)]
