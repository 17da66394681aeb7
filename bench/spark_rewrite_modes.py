"""PROTOTYPE (bench only, not the package): ways to run the spark engine's bin rewrites, compared inside
ONE driver process on the same table, chunk by chunk, modes rotating - so the load of a shared machine
drifts over all modes alike (whole-process runs minutes apart did not: bench/spark_scale.py).

Modes, each rewriting a chunk of bins and committing the chunk in one delta-rs dataChange=false commit:
- ``seq``: one single-task job per bin, one after another (today's engine, minus its per-action runner
  work);
- ``pool<N>``: the same jobs from a driver-side thread pool of N threads (delta-spark OPTIMIZE's way);
- ``union``: ONE job per chunk, one task per bin: the union of ``read(bin).coalesce(1)``, with
  ``spark.sql.unionOutputPartitioning=false`` (see ``Rewriter.union``).

The first chunk of each mode is a warm-up and not counted. Per bin, as the engine does: exact file list with the Delta data schema, output moved into the partition
under a new name, schema check, footer stats; plus a check that output i holds exactly bin i's rows.

    python bench/spark_rewrite_modes.py [--master local[2]|cluster] [--chunk 20] [--modes seq,pool2,pool4,union]
"""

from __future__ import annotations

import argparse
import json
import posixpath
import statistics
import sys
import tempfile
import time
import uuid
from concurrent.futures import ThreadPoolExecutor
from functools import reduce
from pathlib import Path
from typing import Any, Sequence

import pyarrow as pa
import pyarrow.fs as pafs

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
sys.path.insert(0, str(Path(__file__).resolve().parent))

from compactor.engines import delta_commit  # noqa: E402
from compactor.engines.delta_commit import NewFile, table_fs  # noqa: E402
from compactor.engines.parquet_stats import check_written_schema, footer_stats  # noqa: E402

Bin = tuple[str, ...]


class Rewriter:
    """The engine's per-bin work, runnable in the three modes. Not thread-safe per bin; safe across bins."""

    def __init__(self, spark: Any, uri: str) -> None:
        from deltalake import DeltaTable
        from pyspark.sql.pandas.types import from_arrow_schema

        self.spark, self.uri = spark, uri.rstrip("/")
        dt = DeltaTable(self.uri)
        self.pcols = list(dt.metadata().partition_columns)
        snap = pa.table(dt.get_add_actions(flatten=True))
        self.rows = {r["path"]: r for r in snap.select(
            ["path", "size_bytes", "num_records"] + [f"partition.{c}" for c in self.pcols]).to_pylist()}
        arrow_schema = pa.schema(dt.schema().to_arrow())
        self.data_schema = pa.schema([f for f in arrow_schema if f.name not in self.pcols])
        self.spark_schema = from_arrow_schema(self.data_schema)
        self.fs, self.base = table_fs(self.uri)
        self.run = uuid.uuid4().hex[:8]
        self.n = 0

    def _pv(self, files: Bin) -> dict[str, Any]:
        return {c: self.rows[files[0]][f"partition.{c}"] for c in self.pcols}

    def _read(self, files: Bin) -> Any:
        return self.spark.read.schema(self.spark_schema).parquet(*[f"{self.uri}/{p}" for p in files]).coalesce(1)

    def _outputs(self, staging: str) -> list[pafs.FileInfo]:
        return [x for x in self.fs.get_file_info(pafs.FileSelector(f"{self.base}/{staging}"))
                if x.base_name.startswith("part-") and x.path.endswith(".parquet")]

    def _finish(self, local_out: str, files: Bin) -> NewFile:
        final = delta_commit.new_file_name(posixpath.dirname(files[0]))
        self.fs.move(local_out, f"{self.base}/{final}")
        check_written_schema(f"{self.base}/{final}", self.data_schema, self.fs)
        n, stats = footer_stats(f"{self.base}/{final}", self.fs)
        assert n == sum(self.rows[p]["num_records"] for p in files), (final, n)
        return NewFile(final, self.fs.get_file_info(f"{self.base}/{final}").size, self._pv(files), stats, n)

    def one(self, files: Bin, tag: str) -> NewFile:
        """One single-task job for one bin, into its own staging folder (today's engine)."""
        staging = posixpath.join(posixpath.dirname(files[0]), f"_compactor_staging_{self.run}_{tag}")
        self._read(files).write.mode("errorifexists").parquet(f"{self.uri}/{staging}")
        outs = self._outputs(staging)
        assert len(outs) == 1, outs
        nf = self._finish(outs[0].path, files)
        delta_commit.delete_quietly(self.fs, f"{self.base}/{staging}")
        return nf

    def seq(self, chunk: Sequence[Bin]) -> list[NewFile]:
        return [self.one(b, f"{self._next()}") for b in chunk]

    def pool(self, chunk: Sequence[Bin], threads: int) -> list[NewFile]:
        tags = [str(self._next()) for _ in chunk]
        with ThreadPoolExecutor(max_workers=threads) as ex:
            return list(ex.map(self.one, chunk, tags))

    def union(self, chunk: Sequence[Bin]) -> list[NewFile]:
        """One job, one task per bin. Since Spark 4.1 (spark.sql.unionOutputPartitioning, default true) a
        union whose children are all SinglePartition (coalesce(1)) is itself SinglePartition: the bins are
        zipped into ONE task writing ONE file. Turned off, the union concatenates its children's
        partitions, so task i reads exactly bin i, and the writer names its file part-<i>-..."""
        staging = f"_compactor_staging_{self.run}_u{self._next()}"
        self.spark.conf.set("spark.sql.unionOutputPartitioning", "false")
        df = reduce(lambda a, b: a.union(b), [self._read(b) for b in chunk])
        df.write.mode("errorifexists").parquet(f"{self.uri}/{staging}")
        by_index: dict[int, list[str]] = {}
        for x in self._outputs(staging):
            by_index.setdefault(int(x.base_name.split("-")[1]), []).append(x.path)
        assert sorted(by_index) == list(range(len(chunk))) and all(len(v) == 1 for v in by_index.values()), by_index
        out = [self._finish(by_index[i][0], b) for i, b in enumerate(chunk)]
        delta_commit.delete_quietly(self.fs, f"{self.base}/{staging}")
        return out

    def run_mode(self, mode: str, chunk: Sequence[Bin]) -> list[NewFile]:
        if mode == "seq":
            return self.seq(chunk)
        if mode.startswith("pool"):
            return self.pool(chunk, int(mode[4:] or self.spark.sparkContext.defaultParallelism))
        if mode == "union":
            return self.union(chunk)
        raise ValueError(mode)

    def commit(self, chunk: Sequence[Bin], added: Sequence[NewFile], marker: str) -> None:
        removed = [{"path": p, "size_bytes": self.rows[p]["size_bytes"], "partition_values": self._pv(b)}
                   for b in chunk for p in b]
        delta_commit.commit_rewrite(self.uri, None, removed=removed, added=added, partition_columns=self.pcols,
                                    commit_metadata={"compactor.action": marker})

    def _next(self) -> int:
        self.n += 1
        return self.n


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--master", default="local[2]", help="a master URL, or 'cluster' for the test harness")
    ap.add_argument("--chunk", type=int, default=20)
    ap.add_argument("--modes", default="seq,pool2,pool4,union")
    ap.add_argument("--tables", type=int, default=2, help="fresh table copies to run through (200 bins each)")
    args = ap.parse_args()
    import shutil
    import subprocess

    import spark_scale  # noqa: E402 - the same table as the whole-process benchmark

    from compactor.planning.io import load_plan
    from compactor.project.model import SparkSettings

    base = Path(tempfile.mkdtemp(prefix="compactor-rewrite-modes-"))
    modes = args.modes.split(",")
    times: dict[str, list[float]] = {m: [] for m in modes}
    try:
        spark_scale.build(base / "master")
        with _master(args.master, base) as (master, conf):
            from compactor.engines.spark_session import get_or_create_session

            spark = get_or_create_session(SparkSettings(master=master, conf=conf))
            spark.range(1).count()
            k = 0
            for t in range(args.tables):
                copy = base / f"t{t}"
                shutil.copytree(base / "master", copy)
                proj = spark_scale.make_project(base / f"p{t}", copy, master, conf)
                plan_file = proj / "target" / "plan.json"
                subprocess.run([sys.executable, "-m", "compactor", "plan", "--project-dir", str(proj), "--out",
                                str(plan_file)], check=True, capture_output=True)
                bins = [b for tp in load_plan(plan_file).tables for a in tp.actions for b in a.bins]
                rw = Rewriter(spark, str(copy))
                for start in range(0, len(bins), args.chunk):
                    chunk = bins[start:start + args.chunk]
                    mode = modes[k % len(modes)]
                    k += 1
                    t0 = time.perf_counter()
                    added = rw.run_mode(mode, chunk)
                    rw.commit(chunk, added, f"modes-{mode}-{start}")
                    took = time.perf_counter() - t0
                    warmup = k <= len(modes)  # the first chunk of each mode warms the JVM (JIT, codegen)
                    if not warmup:
                        times[mode].append(took / len(chunk))
                    print(json.dumps({"table": t, "start": start, "mode": mode, "bins": len(chunk),
                                      "s": round(took, 2), "warmup": warmup}), file=sys.stderr, flush=True)
                spark_scale.check(copy)
            spark.stop()
    finally:
        shutil.rmtree(base, ignore_errors=True)
    print(f"| mode | chunks | seconds per bin (median) | all chunks (s per bin) |")
    print("|---|---:|---:|---|")
    for m, ts in times.items():
        print(f"| {m} | {len(ts)} | {statistics.median(ts):.3f} | {', '.join(f'{x:.2f}' for x in ts)} |")


class _master:
    """local[N] as given, or the harness's standalone cluster (started here, stopped on exit)."""

    def __init__(self, master: str, base: Path) -> None:
        self.master, self.base, self.cm = master, base, None

    def __enter__(self) -> tuple[str, dict[str, str]]:
        import spark_scale

        if self.master != "cluster":
            return self.master, dict(spark_scale.BASE_CONF)
        from tests.cluster import standalone_cluster

        self.cm = standalone_cluster(self.base / "cluster")
        c = self.cm.__enter__()
        return c.master_url, {**spark_scale.BASE_CONF, **spark_scale.CLUSTER_CONF}

    def __exit__(self, *exc: Any) -> None:
        if self.cm is not None:
            self.cm.__exit__(*exc)


if __name__ == "__main__":
    main()
