"""A small, real file-sink output for `compactor demo`: a Structured Streaming query (file source, one
input file per micro-batch, trigger availableNow) writes a Parquet sink partitioned by `day` with a small
compact interval, then stops. The result has Spark's exact layout: many small files, `N` and `N.compact`
logs under `_spark_metadata`, and a checkpoint whose commits/offsets describe the same batches."""

from __future__ import annotations

import json
import logging
import shutil
from pathlib import Path
from typing import Any

log = logging.getLogger(__name__)

SCHEMA = "id LONG, user STRING, day STRING, amount DOUBLE"


def default_checkpoint(path: Path) -> Path:
    """`<parent>/clicks_checkpoint` for `<parent>/clicks_sink` (what the example policy declares)."""
    return path.with_name(path.name.removesuffix("_sink") + "_checkpoint")


def _write_inputs(src: Path, batches: int, rows_per_batch: int) -> None:
    src.mkdir(parents=True, exist_ok=True)
    for b in range(batches):
        lines = [json.dumps({"id": b * rows_per_batch + i, "user": f"u{(b * 7 + i) % 23}",
                             "day": f"2026-01-0{1 + i % 2}", "amount": round((i * 37 % 1000) / 10, 1)})
                 for i in range(rows_per_batch)]
        (src / f"clicks-{b:05d}.json").write_text("\n".join(lines))


def build_demo_sink(path: str | Path, *, checkpoint: str | Path | None = None, batches: int = 7,
                    rows_per_batch: int = 200, compact_interval: int = 3, spark: Any = None) -> dict[str, Any]:
    """Run the streaming query to completion and stop it. Returns what was written (paths, batches, rows).

    With 7 batches and interval 3 Spark writes `2.compact` and `5.compact`; the day partition gives two
    small files per batch."""
    from compactor.engines.spark_session import get_or_create_session  # imports pyspark lazily

    out = Path(path)
    cp = Path(checkpoint) if checkpoint is not None else default_checkpoint(out)
    src = out.with_name(out.name + "_input")
    for d in (out, cp, src):
        if d.exists():
            shutil.rmtree(d)
    _write_inputs(src, batches, rows_per_batch)
    session = spark or get_or_create_session()
    conf_keys = {"spark.sql.streaming.fileSink.log.compactInterval": str(compact_interval),
                 "spark.sql.streaming.minBatchesToRetain": "100"}
    previous = {k: session.conf.get(k, None) for k in conf_keys}
    for k, v in conf_keys.items():
        session.conf.set(k, v)
    try:
        query = (session.readStream.schema(SCHEMA).option("maxFilesPerTrigger", 1).json(str(src))
                 .writeStream.format("parquet").partitionBy("day").option("checkpointLocation", str(cp))
                 .trigger(availableNow=True).start(str(out)))
        query.awaitTermination(300)
        if query.isActive:  # never leave a writer running behind the demo's back
            query.stop()
        if query.exception() is not None:
            raise RuntimeError(f"demo streaming query failed: {query.exception()}")
    finally:
        for k, v in previous.items():
            if v is None:
                session.conf.unset(k)
            else:
                session.conf.set(k, v)
    files = sorted(out.rglob("part-*.parquet"))
    log.info("demo sink %s: %d batches, %d files", out, batches, len(files))
    return {"path": str(out), "checkpoint": str(cp), "input": str(src), "batches": batches,
            "rows": batches * rows_per_batch, "files": len(files), "compact_interval": compact_interval}
