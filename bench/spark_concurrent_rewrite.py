"""PROTOTYPE (bench only, not the package): the spark engine's rewrite of every bin of one planned table,
run concurrently, committed in batches. Two ways to get one output file per bin out of Spark:

- ``pool``: a driver-side thread pool submits one single-task job per bin (read the bin's exact files,
  coalesce(1), write to its own staging folder), ``--threads`` jobs at a time. What delta-spark's
  OPTIMIZE does (``optimize.maxThreads``).
- ``union``: ONE job per batch with one task per bin: the union of ``read(bin files).coalesce(1)`` for
  every bin of the batch has exactly one partition per bin, in bin order, with no shuffle; the write
  produces ``part-<index>-...`` per task, and index i is bin i.

Per bin, like the engine: exact file list (never a listing), the Delta data schema, the output moved
into the partition under a new name, schema check and footer stats; per batch one delta-rs
dataChange=false commit (``delta_commit.commit_rewrite``, which re-checks the removed files are live).
Left out compared to ``compactor apply``: the table lease, journals, the post-commit overlap scan and row
verification (cheap per commit; they are per action in the engine).

    python bench/spark_concurrent_rewrite.py TABLE PLAN.json --master local[2] --mode pool --threads 2
"""

from __future__ import annotations

import argparse
import json
import posixpath
import time
import uuid
from concurrent.futures import ThreadPoolExecutor
from functools import reduce
from typing import Any

import pyarrow as pa
import pyarrow.fs as pafs

from compactor.engines import delta_commit
from compactor.engines.delta_commit import NewFile, table_fs
from compactor.engines.parquet_stats import check_written_schema, footer_stats
from compactor.planning.io import load_plan
from compactor.project.model import SparkSettings


def _finish(fs: Any, base: str, local_out: str, part_dir: str, data_schema: pa.Schema, pv: dict) -> NewFile:
    final = delta_commit.new_file_name(part_dir)
    fs.move(local_out, f"{base}/{final}")
    check_written_schema(f"{base}/{final}", data_schema, fs)
    n, stats = footer_stats(f"{base}/{final}", fs)
    return NewFile(final, fs.get_file_info(f"{base}/{final}").size, pv, stats, n)


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

    from deltalake import DeltaTable
    from pyspark.sql.pandas.types import from_arrow_schema

    from compactor.engines.spark_session import get_or_create_session

    t0 = time.monotonic()
    spark = get_or_create_session(SparkSettings(master=args.master, conf=json.loads(args.conf)))
    t_session = time.monotonic() - t0
    uri = args.table.rstrip("/")
    plan = load_plan(args.plan)
    dt = DeltaTable(uri)
    pcols = list(dt.metadata().partition_columns)
    snap = pa.table(dt.get_add_actions(flatten=True))
    rows = {r["path"]: r for r in snap.select(["path", "size_bytes", "num_records"] + [f"partition.{c}" for c in pcols]).to_pylist()}
    arrow_schema = pa.schema(dt.schema().to_arrow())
    data_schema = pa.schema([f for f in arrow_schema if f.name not in pcols])
    spark_schema = from_arrow_schema(data_schema)
    fs, base = table_fs(uri)
    bins = [b for t in plan.tables for a in t.actions for b in a.bins]
    assert all(p in rows for b in bins for p in b), "stale plan"
    threads = args.threads or spark.sparkContext.defaultParallelism
    batch = args.batch or len(bins)
    run = uuid.uuid4().hex[:8]

    def read(files):
        return spark.read.schema(spark_schema).parquet(*[f"{uri}/{p}" for p in files]).coalesce(1)

    def one_bin(i: int, files: tuple[str, ...]) -> NewFile:
        pv = {c: rows[files[0]][f"partition.{c}"] for c in pcols}
        part_dir = posixpath.dirname(files[0])
        staging = posixpath.join(part_dir, f"_compactor_staging_{run}_{i}")
        read(files).write.mode("errorifexists").parquet(f"{uri}/{staging}")
        outs = [x.path for x in fs.get_file_info(pafs.FileSelector(f"{base}/{staging}"))
                if x.base_name.startswith("part-") and x.path.endswith(".parquet")]
        assert len(outs) == 1, outs
        nf = _finish(fs, base, outs[0], part_dir, data_schema, pv)
        assert nf.num_records == sum(rows[p]["num_records"] for p in files), (i, nf.num_records)
        delta_commit.delete_quietly(fs, f"{base}/{staging}")
        return nf

    def union_batch(start: int, chunk: list[tuple[str, ...]]) -> list[NewFile]:
        staging = f"_compactor_staging_{run}_{start}"
        # Spark >= 4.1 (spark.sql.unionOutputPartitioning, default true): a union of children that are all
        # SinglePartition (coalesce(1)) is itself SinglePartition - the bins are zipped into ONE task and
        # ONE file. Off, the union concatenates: partition i is bin i.
        spark.conf.set("spark.sql.unionOutputPartitioning", "false")
        t = time.monotonic()
        df = reduce(lambda a, b: a.union(b), [read(files) for files in chunk])
        timing["union_build_s"] = timing.get("union_build_s", 0) + time.monotonic() - t
        df.write.mode("errorifexists").parquet(f"{uri}/{staging}")
        timing["union_write_s"] = timing.get("union_write_s", 0) + time.monotonic() - t
        by_index = {}
        for x in fs.get_file_info(pafs.FileSelector(f"{base}/{staging}")):
            if x.base_name.startswith("part-") and x.path.endswith(".parquet"):
                by_index.setdefault(int(x.base_name.split("-")[1]), []).append(x.path)
        assert sorted(by_index) == list(range(len(chunk))) and all(len(v) == 1 for v in by_index.values()), by_index
        out = []
        for i, files in enumerate(chunk):
            pv = {c: rows[files[0]][f"partition.{c}"] for c in pcols}
            nf = _finish(fs, base, by_index[i][0], posixpath.dirname(files[0]), data_schema, pv)
            # output i must hold exactly bin i's rows
            assert nf.num_records == sum(rows[p]["num_records"] for p in files), (i, nf.num_records)
            out.append(nf)
        delta_commit.delete_quietly(fs, f"{base}/{staging}")
        return out

    commits = 0
    timing: dict[str, float] = {}
    t1 = time.monotonic()
    with ThreadPoolExecutor(max_workers=threads) as pool:
        for start in range(0, len(bins), batch):
            chunk = bins[start:start + batch]
            if args.mode == "pool":
                added = list(pool.map(lambda ib: one_bin(*ib), enumerate(chunk, start)))
            else:
                added = union_batch(start, chunk)
            removed = [{"path": p, "size_bytes": rows[p]["size_bytes"],
                        "partition_values": {c: rows[p][f"partition.{c}"] for c in pcols}} for b in chunk for p in b]
            delta_commit.commit_rewrite(uri, None, removed=removed, added=added, partition_columns=pcols,
                                        commit_metadata={"compactor.action": f"proto-{run}-{start}"})
            commits += 1
    print(json.dumps({"mode": args.mode, "threads": threads, "bins": len(bins), "commits": commits,
                      "session_s": round(t_session, 1), "rewrite_s": round(time.monotonic() - t1, 1),
                      **{k: round(v, 1) for k, v in timing.items()}}))
    spark.stop()


if __name__ == "__main__":
    main()
