"""The file sink's demo table (``TableFormat.demo``): a small real Structured Streaming file sink for
`compactor demo`: a file source (one JSON file per micro-batch), partitioned by country, compactInterval 3,
stopped after 7 batches. The demo then waits out the example policy's quiet period, so the real writer
guard lets the compaction through. It needs Java and pyspark; `compactor demo --no-sink` leaves it out."""

from __future__ import annotations

import importlib.util
import json
import logging
import random
import shutil
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from compactor.models.demo import DemoSwitch, TableSnapshot

log = logging.getLogger(__name__)

#: must equal sink.quiet_period of the example policy tables/clicks_sink.yml
DEMO_QUIET_S = 10
BATCHES = 7
ROWS_PER_BATCH = 200


@dataclass(frozen=True)
class DemoSink:
    """The demo's file-sink output, as written."""

    path: str
    checkpoint: str
    batches: int
    rows: int
    files: int


def build_demo_sink(path: Path | str, *, batches: int = BATCHES, wait_quiet: bool = True,
                    rows_per_batch: int = ROWS_PER_BATCH, spark: Any = None) -> DemoSink:
    """Write the sink at ``path`` (checkpoint at ``<parent>/clicks_checkpoint``, input files at
    ``<parent>/clicks_input``), stop the query, and wait until the log is older than the quiet period."""
    from compactor.engines.spark_session import get_or_create_session
    from compactor.project.model import SparkSettings

    out = Path(path)
    checkpoint = out.parent / "clicks_checkpoint"
    src = out.parent / "clicks_input"
    src.mkdir(parents=True, exist_ok=True)
    rng = random.Random(7)
    for b in range(batches):
        rows = [{"click_id": b * rows_per_batch + i, "country": rng.choice(["de", "fr", "us"]),
                 "user_id": rng.randrange(1000), "ts": 1_700_000_000 + b * 60 + i} for i in range(rows_per_batch)]
        (src / f"clicks-{b:04d}.json").write_text("\n".join(json.dumps(r) for r in rows))
    # a streaming file sink needs no jars of a table format (and the demo should not wait for Ivy to fetch any)
    spark = spark or get_or_create_session(SparkSettings())
    spark.conf.set("spark.sql.streaming.fileSink.log.compactInterval", "3")
    started = time.monotonic()
    q = (spark.readStream.schema("click_id LONG, country STRING, user_id LONG, ts LONG")
         .option("maxFilesPerTrigger", 1).json(str(src))
         .writeStream.format("parquet").partitionBy("country").option("checkpointLocation", str(checkpoint))
         .trigger(availableNow=True).start(str(out)))
    q.awaitTermination(120)
    q.stop()  # never leave a writer running behind the demo's back
    if q.exception() is not None:
        raise RuntimeError(f"the demo streaming query failed: {q.exception()}")
    log.info("demo sink written in %.1fs", time.monotonic() - started)
    if wait_quiet:
        # the writer guard refuses a sink whose log or checkpoint changed within the quiet period
        time.sleep(DEMO_QUIET_S + 1)
    files = [p for p in out.rglob("*.parquet") if not any(x.startswith("_") for x in p.relative_to(out).parts)]
    return DemoSink(path=str(out), checkpoint=str(checkpoint), batches=batches, rows=batches * rows_per_batch,
                    files=len(files))


class FileSinkDemo:
    """The demo lake's `clicks_sink`: the DemoTable of format "spark_file_sink"."""

    name = "clicks_sink"
    policy_files: tuple[str, ...] = ("tables/clicks_sink.yml",)
    switch: DemoSwitch | None = DemoSwitch("sink", "Skip the Structured Streaming file-sink part.")

    def unavailable(self) -> str | None:
        # the sink part needs a JVM and pyspark (the [spark] extra); without them the demo goes on
        if importlib.util.find_spec("pyspark") is None or shutil.which("java") is None:
            return "file-sink demo skipped: it needs Java and pyspark (pip install 'compactor[spark]')"
        return None

    def build(self, path: Path, say: Callable[[str], None]) -> None:
        say(f"running a Structured Streaming query into `{self.name}` ...")
        build_demo_sink(path)

    def snapshot(self, uri: str) -> TableSnapshot | None:
        return None  # the demo shows no before/after of a sink's output
