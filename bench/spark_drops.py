"""The spark engine's rewrite of bins whose inputs drop rows (a Delta file's deletion vector, handed to the
engine as BinInput.drop): FILES parquet files of ROWS rows (three row groups each), a random SHARE of each
file's rows dropped, rewritten as one bin of all of them and as BINS bins in one call (a commit group's one
Spark job); each output is checked to hold exactly the kept rows. Time of ``SparkEngine.rewrite`` only
(the session is started first), per repeat.

Measured 2026-11-28 on the shared 2-core box, local[2], 20 files of 50,000 rows (docs/spark-engine.md):
each dropping input read alone and filtered with ``row_index IN (...)``: 10% dropped 40-56 s a bin; the one
scan anti-joined with a broadcast table of the dropped positions (engines/spark_drops.py): 4.0-6.8 s.

    python bench/spark_drops.py [--files 20] [--rows 50000] [--shares 0.01,0.1,0.9] [--bins 1,4] [--repeat 3]
"""

from __future__ import annotations

import argparse
import random
import tempfile
import time
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq

from compactor.engines.base import BinInput, BinJob
from compactor.engines.spark import SparkEngine
from compactor.project.model import Target

SCHEMA = pa.schema([("id", pa.int64()), ("amount", pa.float64()), ("name", pa.string())])


def _files(root: Path, files: int, rows: int) -> list[str]:
    out = []
    for f in range(files):
        ids = list(range(f * rows, (f + 1) * rows))
        table = pa.table({"id": ids, "amount": [float(i) for i in ids], "name": [f"n{i % 97}" for i in ids]},
                         schema=SCHEMA)
        path = root / f"part-{f:05d}-{f:08x}.parquet"
        pq.write_table(table, path, row_group_size=rows // 3)
        out.append(str(path))
    return out


def _jobs(root: Path, files: list[str], rows: int, share: float, bins: int, rnd: random.Random) -> list[BinJob]:
    per = len(files) // bins
    out = []
    for b in range(bins):
        inputs = tuple(BinInput(p, frozenset(rnd.sample(range(rows), int(rows * share))))
                       for p in files[b * per:(b + 1) * per])
        token = f"{time.time_ns()}_{b}"
        out.append(BinJob(inputs, str(root / f"out-{token}.parquet"), str(root / f"_stage_{token}")))
    return out


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--files", type=int, default=20)
    ap.add_argument("--rows", type=int, default=50_000)
    ap.add_argument("--shares", default="0.01,0.1,0.9")
    ap.add_argument("--bins", default="1,4")
    ap.add_argument("--repeat", type=int, default=3)
    args = ap.parse_args()
    from pyspark.sql import SparkSession

    spark = (SparkSession.builder.master("local[2]").config("spark.ui.enabled", "false")
             .config("spark.sql.shuffle.partitions", "2").config("spark.driver.memory", "1g").getOrCreate())
    spark.sparkContext.setLogLevel("ERROR")
    engine = SparkEngine(Target(engine="spark"))  # takes the active session
    rnd = random.Random(1)
    with tempfile.TemporaryDirectory(prefix="spark-drops-") as tmp:
        root = Path(tmp)
        files = _files(root, args.files, args.rows)
        for share in (float(s) for s in args.shares.split(",")):
            for bins in (int(b) for b in args.bins.split(",")):
                times = []
                for _ in range(args.repeat):
                    jobs = _jobs(root, files, args.rows, share, bins, rnd)
                    start = time.perf_counter()
                    written = engine.rewrite(jobs, SCHEMA)
                    times.append(time.perf_counter() - start)
                    assert all(w.rows == w.rows_kept for w in written), "an output holds other rows"
                    for w in written:
                        Path(w.location).unlink()
                print(f"share {share:.0%}, {bins} bin(s) of {args.files // bins} files x {args.rows} rows: "
                      + " ".join(f"{t:.2f}s" for t in times), flush=True)
    spark.stop()


if __name__ == "__main__":
    main()
