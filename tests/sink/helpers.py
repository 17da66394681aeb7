"""Real Structured Streaming queries writing a partitioned file sink (file source, one file per batch)."""

from __future__ import annotations

import datetime as dt
import json
from pathlib import Path

from compactor.formats.file_sink.state import read_sink_state
from compactor.policy.model import Compaction, Sink, TablePolicy, Triggers
from compactor.project.model import Target
from compactor.tasks.plan import build_plan

ROWS = 50


def add_input(src: Path, batch: int) -> None:
    src.mkdir(parents=True, exist_ok=True)
    lines = [json.dumps({"id": batch * ROWS + i, "part": i % 2, "v": float(i)}) for i in range(ROWS)]
    (src / f"in-{batch:05d}.json").write_text("\n".join(lines))


def run_query(spark, src: Path, out: Path, checkpoint: Path, *, compact_interval: int = 3):
    """Process every input file present (one batch per file) and stop."""
    spark.conf.set("spark.sql.streaming.fileSink.log.compactInterval", str(compact_interval))
    # let the writer delete old log files promptly, so replaced data files become unreferenced
    spark.conf.set("spark.sql.streaming.minBatchesToRetain", "2")
    spark.conf.set("spark.sql.streaming.fileSink.log.cleanupDelay", "0")
    q = (spark.readStream.schema("id LONG, part INT, v DOUBLE").option("maxFilesPerTrigger", 1).json(str(src))
         .writeStream.format("parquet").partitionBy("part").option("checkpointLocation", str(checkpoint))
         .trigger(availableNow=True).start(str(out)))
    q.awaitTermination(120)
    return q


def sink_ids(spark, out: Path) -> list[int]:
    return sorted(r["id"] for r in spark.read.parquet(str(out)).select("id").collect())


def sink_plan(out: Path, *, engine: str = "spark", quiet_period: int = 0, grace_period: int = 3600,
              readers: str = "none", now: dt.datetime | None = None):
    policy = TablePolicy(name="sink", format="spark_file_sink", path=str(out),
                         compaction=Compaction(target_file_size=64 * 2**20, min_file_size=32 * 2**20,
                                               triggers=Triggers(min_input_files=2)),
                         sink=Sink(quiet_period=quiet_period, grace_period=grace_period,
                                   downstream_streaming_readers=readers))
    state = read_sink_state(str(out))
    return build_plan([policy], {"sink": state}, now=now or dt.datetime.now(dt.UTC),
                      target=Target(engine=engine), project_name="sink-tests")


def make_manual_sink(root: Path, batches: int = 7, interval: int = 3, old_batches: int = 0) -> None:
    """A file-sink output in Spark's exact layout (one parquet per partition per batch, logs 0..N), without
    Spark: for planner/prune tests. Entries of the first ``old_batches`` batches have an ancient mtime."""
    import time

    import pyarrow as pa
    import pyarrow.parquet as pq

    meta = root / "_spark_metadata"
    meta.mkdir(parents=True)
    listed: list[str] = []
    now = int(time.time() * 1000)
    for b in range(batches):
        new = []
        for part in (0, 1):
            f = root / f"part={part}" / f"part-{b:05d}-{part}.c000.snappy.parquet"
            f.parent.mkdir(exist_ok=True)
            pq.write_table(pa.table({"id": [b * 10 + part * 5 + i for i in range(5)]}), f)
            new.append(json.dumps({"path": f.as_uri(), "size": f.stat().st_size, "isDir": False,
                                   "modificationTime": 1 if b < old_batches else now, "blockReplication": 1,
                                   "blockSize": 1, "action": "add"}))
        listed += new
        compact = (b + 1) % interval == 0
        (meta / (f"{b}.compact" if compact else str(b))).write_text("v1\n" + "\n".join(listed if compact else new))
