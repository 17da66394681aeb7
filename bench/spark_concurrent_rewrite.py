"""PROTOTYPE (bench only, not the package): the spark engine's rewrite of every bin of one planned table in
one process, concurrently, committed in batches - the ``pool`` and ``union`` sides of
bench/spark_scale.py (whole-process timing). The per-bin work is ``Rewriter`` in
bench/spark_rewrite_modes.py:

- ``pool``: a driver-side thread pool submits one single-task job per bin, ``--threads`` at a time (what
  delta-spark's OPTIMIZE does with ``optimize.maxThreads``);
- ``union``: ONE job per batch with one task per bin (union of ``read(bin).coalesce(1)``, with
  ``spark.sql.unionOutputPartitioning=false``).

Each batch (``--batch`` bins; default all) is one delta-rs dataChange=false commit. Left out compared to
``compactor apply``: the table lease, journals, the post-commit overlap scan and row verification.

    python bench/spark_concurrent_rewrite.py TABLE PLAN.json --master local[2] --mode pool --threads 2
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from spark_rewrite_modes import Rewriter  # noqa: E402

from compactor.planning.io import load_plan  # noqa: E402
from compactor.project.model import SparkSettings  # noqa: E402


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("table")
    ap.add_argument("plan")
    ap.add_argument("--master", default="local[2]")
    ap.add_argument("--conf", default="{}", help="JSON object of Spark settings")
    ap.add_argument("--mode", choices=["pool", "union"], default="pool")
    ap.add_argument("--threads", type=int, default=0, help="pool size; 0 = defaultParallelism")
    ap.add_argument("--batch", type=int, default=0, help="bins per commit; 0 = all bins in one commit")
    args = ap.parse_args()

    from compactor.engines.spark_session import get_or_create_session

    t0 = time.monotonic()
    spark = get_or_create_session(SparkSettings(master=args.master, conf=json.loads(args.conf)))
    t_session = time.monotonic() - t0
    rw = Rewriter(spark, args.table)
    bins = [b for t in load_plan(args.plan).tables for a in t.actions for b in a.bins]
    assert all(p in rw.rows for b in bins for p in b), "stale plan"
    threads = args.threads or spark.sparkContext.defaultParallelism
    batch = args.batch or len(bins)
    commits = 0
    t1 = time.monotonic()
    for start in range(0, len(bins), batch):
        chunk = bins[start:start + batch]
        added = rw.pool(chunk, threads) if args.mode == "pool" else rw.union(chunk)
        rw.commit(chunk, added, f"proto-{rw.run}-{start}")
        commits += 1
    print(json.dumps({"mode": args.mode, "threads": threads, "bins": len(bins), "commits": commits,
                      "session_s": round(t_session, 1), "rewrite_s": round(time.monotonic() - t1, 1)}))
    spark.stop()


if __name__ == "__main__":
    main()
