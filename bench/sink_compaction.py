"""Benchmark: compactor's spark-engine compaction of a Structured Streaming file sink vs a hand-written
Spark rewrite with the same settings, and full-scan read time before vs after.

A real streaming query (parquet file source, maxFilesPerTrigger 8, compactInterval 5) writes ~1M rows in
200+ small files. The hand-written rewrite reads the same files and writes the same number of output files
(coalesce) to a scratch directory: it is what compactor does minus the manifest work and the guards, so the
ratio is compactor's overhead. Usage: python bench/sink_compaction.py [--rows 1000000] [--files 200]
"""

from __future__ import annotations

import argparse
import datetime as dt
import json
import shutil
import tempfile
import time
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq


def make_input(src: Path, files: int, rows: int) -> None:
    src.mkdir(parents=True)
    per = rows // files
    for i in range(files):
        ids = pa.array(range(i * per, (i + 1) * per), pa.int64())
        pq.write_table(pa.table({"id": ids, "k": pa.array([f"k{j % 7}" for j in range(per)]),
                                 "v": pa.array([float(j) for j in range(per)])}), src / f"in-{i:05d}.parquet")


def scan(spark, out: Path) -> tuple[float, int, float]:
    t0 = time.perf_counter()
    r = spark.read.parquet(str(out)).selectExpr("count(*) c", "sum(id) s").collect()[0]
    return time.perf_counter() - t0, r["c"], r["s"]


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--rows", type=int, default=1_000_000)
    ap.add_argument("--files", type=int, default=200)
    ap.add_argument("--repeat", type=int, default=3)
    args = ap.parse_args()

    from compactor.engines.spark_session import get_or_create_session
    from compactor.formats.file_sink.state import read_sink_state
    from compactor.policy.model import Compaction, Sink, TablePolicy, Triggers
    from compactor.project.model import Target
    from compactor.tasks.apply import apply_plan
    from compactor.tasks.plan import build_plan

    spark = get_or_create_session()
    spark.sparkContext.setLogLevel("ERROR")
    work = Path(tempfile.mkdtemp(prefix="sink-bench-"))
    src, out, cp = work / "in", work / "out", work / "cp"
    make_input(src, args.files, args.rows)
    spark.conf.set("spark.sql.streaming.fileSink.log.compactInterval", "5")
    # one task (so one output file) per input file, as a stream of small upstream files produces
    spark.conf.set("spark.sql.files.openCostInBytes", str(256 << 20))
    t0 = time.perf_counter()
    q = (spark.readStream.schema("id LONG, k STRING, v DOUBLE").option("maxFilesPerTrigger", 8).parquet(str(src))
         .writeStream.format("parquet").option("checkpointLocation", str(cp)).trigger(availableNow=True)
         .start(str(out)))
    q.awaitTermination()
    stream_s = time.perf_counter() - t0
    spark.conf.unset("spark.sql.files.openCostInBytes")
    state = read_sink_state(str(out))
    n_files = state.file_count
    listed = sum(state.files.column("in_compact").to_pylist())

    scans_before = [scan(spark, out) for _ in range(args.repeat)]
    policy = TablePolicy(name="bench", format="spark_file_sink", path=str(out),
                         compaction=Compaction(target_file_size=256 << 20, min_file_size=64 << 20,
                                               triggers=Triggers(min_input_files=2)),
                         sink=Sink(quiet_period=0, downstream_streaming_readers="none"))
    plan = build_plan([policy], {"bench": state}, now=dt.datetime.now(dt.UTC), target=Target(engine="spark"),
                      project_name="bench")
    bins = sum(len(a.bins) for a in plan.tables[0].actions)
    inputs = [f for a in plan.tables[0].actions for f in a.input_paths]

    # hand-written rewrite: the same input files, the same number of output files, no manifest work
    hand = []
    for i in range(args.repeat):
        dst = work / f"hand{i}"
        t0 = time.perf_counter()
        spark.read.parquet(*inputs).coalesce(bins).write.mode("overwrite").parquet(str(dst))
        hand.append(time.perf_counter() - t0)
        shutil.rmtree(dst)

    t0 = time.perf_counter()
    run = apply_plan(plan, target=Target(engine="spark"))
    compactor_s = time.perf_counter() - t0
    assert run.ok, [r.error for r in run.results]
    after_state = read_sink_state(str(out))
    scans_after = [scan(spark, out) for _ in range(args.repeat)]
    assert scans_after[0][1:] == scans_before[0][1:], "rows changed"

    best_hand = min(hand)
    before_s = min(s[0] for s in scans_before)
    after_s = min(s[0] for s in scans_after)
    result = {
        "rows": scans_before[0][1], "sink_files_before": n_files, "files_in_latest_compact": listed,
        "sink_files_after": after_state.file_count, "bins": bins, "streaming_write_s": round(stream_s, 2),
        "handwritten_rewrite_s": [round(x, 3) for x in hand], "compactor_apply_s": round(compactor_s, 3),
        "ratio_compactor_vs_handwritten": round(compactor_s / best_hand, 2),
        "full_scan_before_s": round(before_s, 3), "full_scan_after_s": round(after_s, 3),
        "scan_speedup": round(before_s / after_s, 2),
    }
    print(json.dumps(result, indent=2))
    shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()
