"""Apply overhead: compactor vs the raw engine on identical copies of one table (2,000 small files by
default; --files 20000 for the large case).

- local: `python -m compactor apply plan.json` (compactor's own pyarrow rewrite of the planned bins) vs a
  bare script calling deltalake's `optimize.compact()` on the whole table with the same target size (what
  a user would otherwise run).
- spark: compactor's spark engine (in a script that builds its own local SparkSession) vs a hand-written
  Spark rewrite of the same bins (read the exact files, coalesce(1), write) plus the same delta-rs commit.

Whole-process wall time (interpreter and JVM start included), alternating runs, median of N.

    python bench/apply_overhead.py [--repeat 3] [--skip-spark]
"""

from __future__ import annotations

import argparse
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import textwrap
import time
from pathlib import Path

PARTITIONS, ROWS = 20, 200
TARGET = 64 * 2**20

BARE_LOCAL = textwrap.dedent("""
    import sys
    from deltalake import DeltaTable
    DeltaTable(sys.argv[1]).optimize.compact(target_size=%d)
""" % TARGET)

BARE_SPARK = textwrap.dedent("""
    import json, sys, time, uuid, os, shutil
    from pyspark.sql import SparkSession
    from deltalake import DeltaTable
    from deltalake.transaction import AddAction, RemoveAction
    import pyarrow.parquet as pq
    spark = (SparkSession.builder.master("local[2]").config("spark.ui.enabled", "false")
             .config("spark.sql.parquet.outputTimestampType", "TIMESTAMP_MICROS").getOrCreate())
    root = sys.argv[1]
    plan = json.load(open(sys.argv[2]))
    dt = DeltaTable(root)
    actions = []
    now = int(time.time() * 1000)
    for a in plan["tables"][0]["actions"]:
        for b in a["bins"]:
            out = f"{root}/{os.path.dirname(b[0])}/_tmp{uuid.uuid4().hex}"
            spark.read.parquet(*[f"{root}/{p}" for p in b]).coalesce(1).write.parquet(out)
            f = next(x for x in os.listdir(out) if x.startswith("part-"))
            rel = f"{os.path.dirname(b[0])}/part-{uuid.uuid4()}.parquet"
            os.rename(f"{out}/{f}", f"{root}/{rel}")
            shutil.rmtree(out)
            n = pq.ParquetFile(f"{root}/{rel}").metadata.num_rows
            actions.append(AddAction(rel, os.path.getsize(f"{root}/{rel}"), a["partition"], now, False,
                                     json.dumps({"numRecords": n})))
            actions += [RemoveAction(p, False, now, os.path.getsize(f"{root}/{p}"), a["partition"]) for p in b]
    dt.create_write_transaction(actions, mode="append", schema=dt.schema(), partition_by=["part"])
""")

COMPACTOR_SPARK = textwrap.dedent("""
    import sys
    from pyspark.sql import SparkSession
    spark = (SparkSession.builder.master("local[2]").config("spark.ui.enabled", "false").getOrCreate())
    from compactor.tasks.apply import apply_plan
    from compactor.engines.spark import SparkEngine
    from compactor.tasks.plan_file import load_plan
    from compactor.project.model import Target
    run = apply_plan(load_plan(sys.argv[2]), target=Target(engine="spark"), engine=SparkEngine(Target(engine="spark")))
    assert run.ok, [r.error for r in run.results]
""")


def build(path: Path, files: int) -> None:
    """``files`` small files in PARTITIONS partitions, written with pyarrow and committed in batches of
    2,000 adds through delta-rs (one write_deltalake per file would take an hour at 20,000)."""
    import json

    import pyarrow as pa
    import pyarrow.parquet as pq
    from deltalake import DeltaTable, write_deltalake
    from deltalake.transaction import AddAction

    schema = pa.schema([("part", pa.string()), ("id", pa.int64()), ("v", pa.float64())])
    write_deltalake(str(path), schema.empty_table(), partition_by=["part"])
    dt = DeltaTable(str(path))
    actions, n = [], 0
    for i in range(files):
        p = f"p{i % PARTITIONS:02d}"
        rel = f"part={p}/part-{i:06d}.parquet"
        (path / f"part={p}").mkdir(exist_ok=True)
        pq.write_table(pa.table({"id": pa.array(range(n, n + ROWS), pa.int64()),
                                 "v": pa.array([float(k) for k in range(ROWS)])}), path / rel)
        actions.append(AddAction(rel, (path / rel).stat().st_size, {"part": p}, int(time.time() * 1000), True,
                                 json.dumps({"numRecords": ROWS})))
        n += ROWS
        if len(actions) == 2000 or i == files - 1:
            dt.create_write_transaction(actions, mode="append", schema=dt.schema(), partition_by=["part"])
            actions = []


def make_project(root: Path, table: Path, engine: str) -> Path:
    proj = root / f"proj-{engine}"
    (proj / "policies").mkdir(parents=True, exist_ok=True)
    (proj / "compactor.yml").write_text("name: bench\nprofile: bench\n")
    (proj / "profiles.yml").write_text(f"bench:\n  target: t\n  outputs:\n    t: {{engine: {engine}}}\n")
    (proj / "policies" / "t.yml").write_text(
        f"version: 1\ntables:\n  - name: t\n    path: {table}\n    compaction:\n"
        f"      target_file_size: {TARGET}\n      triggers: {{min_input_files: 2}}\n")
    return proj


def timed(cmd: list[str]) -> float:
    t0 = time.perf_counter()
    # the post-commit watch window (3 minutes by default) is a wait, not work: the bare engine has none
    subprocess.run(cmd, check=True, capture_output=True, env={**os.environ, "COMPACTOR_WATCH_WINDOW": "0"})
    return time.perf_counter() - t0


def bench(kind: str, base: Path, master: Path, repeat: int) -> tuple[float, float]:
    ours, raw = [], []
    for i in range(repeat):
        for side in ("compactor", "raw") if i % 2 == 0 else ("raw", "compactor"):
            copy = base / f"{kind}-{side}-{i}"
            shutil.copytree(master, copy)
            proj = make_project(base / f"{kind}-{side}-{i}-p", copy, "spark" if kind == "spark" else "local")
            plan = proj / "target" / "plan.json"
            subprocess.run([sys.executable, "-m", "compactor", "plan", "--project-dir", str(proj), "--out", str(plan)],
                           check=True, capture_output=True)
            if kind == "local":
                cmd = ([sys.executable, "-m", "compactor", "apply", str(plan), "--project-dir", str(proj)]
                       if side == "compactor" else [sys.executable, "-c", BARE_LOCAL, str(copy)])
            else:
                cmd = [sys.executable, "-c", COMPACTOR_SPARK if side == "compactor" else BARE_SPARK, str(copy), str(plan)]
            (ours if side == "compactor" else raw).append(timed(cmd))
    return statistics.median(ours), statistics.median(raw)


def bench_local(base: Path, master: Path, repeat: int) -> tuple[float, float]:
    """compactor apply (local engine) vs bare deltalake optimize.compact(); (ours, raw) medians."""
    return bench("local", base, master, repeat)


def bench_spark(base: Path, master: Path, repeat: int) -> tuple[float, float]:
    """compactor's spark engine vs a hand-written Spark rewrite of the same bins; (ours, raw) medians."""
    return bench("spark", base, master, repeat)


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--skip-spark", action="store_true")
    ap.add_argument("--files", type=int, default=2000)
    args = ap.parse_args()
    base = Path(tempfile.mkdtemp(prefix="compactor-apply-bench-"))
    master = base / "master"
    t0 = time.time()
    build(master, args.files)
    print(f"built {args.files} files in {time.time() - t0:.0f}s", file=sys.stderr)
    rows = [("local (delta-rs)", *bench_local(base, master, args.repeat))]
    if not args.skip_spark:
        rows.append(("spark", *bench_spark(base, master, args.repeat)))
    print("| engine | compactor apply (s) | raw engine (s) | ratio |")
    print("|---|---:|---:|---:|")
    for name, ours, raw in rows:
        print(f"| {name} | {ours:.2f} | {raw:.2f} | {ours / raw:.2f}x |")
    shutil.rmtree(base, ignore_errors=True)


if __name__ == "__main__":
    main()
