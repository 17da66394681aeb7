"""File-sink compaction: compactor (spark engine, and local/pyarrow) vs a hand-written Spark rewrite.

The sink is built in Spark's exact file-sink layout (one parquet per partition per micro-batch, `N` and
`N.compact` logs under `_spark_metadata`, compact interval 10): 2 partitions x 100 batches = 200 files,
1,000,000 rows. Each measured run works on a fresh copy.

- compactor: build_plan + apply_plan (guards, journal, verification, atomic .compact replace, ledger).
- hand-written: per partition read the same listed files, coalesce(1), write to a staging dir, move the
  output into the partition folder (the data rewrite alone: no manifest update, no verification).
- read: full scan `spark.read.parquet(dir)` (sum over a column) before vs after compaction.

One local[2] SparkSession (driver 1g) shared by all runs; runs alternate; median of --repeat.

    python bench/sink_compaction.py [--repeat 3]
"""

from __future__ import annotations

import argparse
import datetime as dt
import json
import shutil
import statistics
import tempfile
import time
import uuid
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq

PARTS, BATCHES, ROWS, INTERVAL = 2, 100, 5_000, 10  # 200 files, 1M rows


def build_sink(root: Path) -> None:
    meta = root / "_spark_metadata"
    meta.mkdir(parents=True)
    listed: list[str] = []
    now = int(time.time() * 1000) - 3_600_000
    for b in range(BATCHES):
        new = []
        for part in range(PARTS):
            base = (b * PARTS + part) * ROWS
            table = pa.table({"id": pa.array(range(base, base + ROWS), pa.int64()),
                              "user": pa.array([f"u{i % 997}" for i in range(ROWS)]),
                              "amount": pa.array([float(i % 1000) / 10 for i in range(ROWS)])})
            f = root / f"part={part}" / f"part-{b:05d}-{uuid.uuid4()}.c000.snappy.parquet"
            f.parent.mkdir(exist_ok=True)
            pq.write_table(table, f, compression="snappy")
            new.append(json.dumps({"path": f.as_uri(), "size": f.stat().st_size, "isDir": False,
                                   "modificationTime": now, "blockReplication": 1, "blockSize": 1,
                                   "action": "add"}))
        listed += new
        compact = (b + 1) % INTERVAL == 0
        (meta / (f"{b}.compact" if compact else str(b))).write_text("v1\n" + "\n".join(listed if compact else new))


def compactor_run(root: Path, engine: str) -> float:
    from compactor.apply.runner import apply_plan
    from compactor.planning.build import build_plan
    from compactor.policy.model import Compaction, Sink, TablePolicy, Triggers
    from compactor.project.model import Target
    from compactor.sink.state import read_sink_state

    t = time.perf_counter()
    policy = TablePolicy(name="sink", format="spark_file_sink", path=str(root),
                         compaction=Compaction(target_file_size=256 * 2**20, min_file_size=64 * 2**20,
                                               triggers=Triggers(min_input_files=2)),
                         sink=Sink(quiet_period=0, downstream_streaming_readers="none"))
    plan = build_plan([policy], {"sink": read_sink_state(str(root))}, now=dt.datetime.now(dt.timezone.utc),
                      target=Target(engine=engine), project_name="bench")
    run = apply_plan(plan, target=Target(engine=engine))
    elapsed = time.perf_counter() - t
    assert run.ok and len(run.results) == PARTS, [r.error for r in run.results]
    return elapsed


def hand_written_run(spark, root: Path) -> float:
    """The same data rewrite without compactor: read the listed files, coalesce(1), write, move in."""
    from compactor.sink.log import entry_local_path, list_log, read_entries

    t = time.perf_counter()
    log = list_log(root / "_spark_metadata")
    files = [entry_local_path(e["path"], root) for e in read_entries(log.latest_compact.path)]
    for part in range(PARTS):
        inputs = [str(f) for f in files if f.parent.name == f"part={part}"]
        staging = root / f"part={part}" / f"_staging_{uuid.uuid4().hex}"
        spark.read.option("basePath", str(root / f"part={part}")).parquet(*inputs).coalesce(1) \
            .write.mode("overwrite").parquet(str(staging))
        (out,) = [p for p in staging.iterdir() if p.suffix == ".parquet"]
        out.rename(root / f"part={part}" / f"part-{uuid.uuid4()}.c000.snappy.parquet")
        shutil.rmtree(staging)
    return time.perf_counter() - t


def scan(spark, root: Path) -> tuple[float, int, float]:
    t = time.perf_counter()
    row = spark.read.parquet(str(root)).selectExpr("count(*) AS n", "sum(amount) AS s").collect()[0]
    return time.perf_counter() - t, row["n"], row["s"]


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--repeat", type=int, default=3)
    args = ap.parse_args()
    from pyspark.sql import SparkSession

    spark = (SparkSession.builder.master("local[2]").config("spark.driver.memory", "1g")
             .config("spark.ui.enabled", "false").config("spark.sql.shuffle.partitions", "2").getOrCreate())
    spark.sparkContext.setLogLevel("ERROR")
    work = Path(tempfile.mkdtemp(prefix="sink-bench-"))
    try:
        pristine = work / "pristine"
        build_sink(pristine)
        n_files = sum(1 for _ in pristine.rglob("*.parquet"))
        times: dict[str, list[float]] = {"compactor_spark": [], "hand_spark": [], "compactor_local": []}
        scans_before: list[float] = []
        scans_after: list[float] = []
        scan(spark, pristine)  # warm the JVM once before measuring
        for i in range(args.repeat):
            for name in times:
                copy = work / f"{name}-{i}"
                shutil.copytree(pristine, copy)
                if name == "hand_spark":
                    times[name].append(hand_written_run(spark, copy))
                else:
                    times[name].append(compactor_run(copy, name.split("_")[1]))
            before, n0, s0 = scan(spark, pristine)
            after, n1, s1 = scan(spark, work / f"compactor_spark-{i}")
            assert (n0, round(s0, 3)) == (n1, round(s1, 3)) == (n0, round(s0, 3)), (n0, s0, n1, s1)
            scans_before.append(before)
            scans_after.append(after)
        med = {k: statistics.median(v) for k, v in times.items()}
        result = {"files": n_files, "rows": n0, "repeat": args.repeat,
                  "median_s": {k: round(v, 3) for k, v in med.items()},
                  "compactor_spark_vs_hand_spark": round(med["compactor_spark"] / med["hand_spark"], 2),
                  "scan_before_s": round(statistics.median(scans_before), 3),
                  "scan_after_s": round(statistics.median(scans_after), 3),
                  "scan_speedup": round(statistics.median(scans_before) / statistics.median(scans_after), 2)}
        print(json.dumps(result, indent=2))
    finally:
        shutil.rmtree(work, ignore_errors=True)
        spark.stop()


if __name__ == "__main__":
    main()
