"""compactor's spark engine against the ways a Spark user compacts a Delta table without it.

One Spark-written (delta-spark) table: PARTITIONS partitions x FILES small files, all in one commit (40
write tasks, each writing one file into every partition). Four sides, each on its own copy of that table,
each a fresh Python process (interpreter, JVM and Delta jars start included), alternating order, median
of N:

- ``compactor rewrite``: ``compactor apply --auto-approve`` (plan and apply), spark engine,
  ``compaction.method: rewrite`` (Spark writes the bins, delta-rs commits one dataChange=false commit per
  partition);
- ``compactor optimize``: the same, ``compaction.method: optimize`` (delta-spark's OPTIMIZE, one
  statement per planned partition);
- ``delta-spark OPTIMIZE``: a hand-written script running ``OPTIMIZE delta.`t``` once (whole table);
- ``no-shuffle rewrite``: Maxar's recipe, one table partition at a time: read the partition with
  ``spark.sql.files.maxPartitionBytes`` = target, ``spark.sql.files.openCostInBytes`` = 1 and
  ``spark.default.parallelism`` = 1 (so the partition's files become one read split), write it back with
  ``replaceWhere`` and ``dataChange=false``.

Every session: ``local[2]``, 2 GiB driver, UI off, the Delta jars loaded the same way
(``configure_spark_with_delta_pip``). Target file size 64 MiB everywhere (delta-spark's
``optimize.maxFileSize`` too). COMPACTOR_WATCH_WINDOW=0 for compactor (the post-commit watch is a wait).
After each run the copy is read with delta-rs: live files, rows and sum(id) must be PARTITIONS files and
the original rows, else the run does not count.

    python bench/spark_compare.py [--repeat 3] [--partitions 50] [--files 40] [--rows 1000]
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import textwrap
import time
from pathlib import Path

TARGET = 64 * 2**20
MASTER = "local[2]"
CONF = {"spark.driver.memory": "2g", "spark.ui.enabled": "false", "spark.sql.shuffle.partitions": "2"}

SESSION = textwrap.dedent("""
    import json, sys, time
    t0 = time.perf_counter()
    from pyspark.sql import SparkSession
    from delta import configure_spark_with_delta_pip
    conf = json.loads(sys.argv[2])
    b = (SparkSession.builder.master("@MASTER@").appName("bench")
         .config("spark.sql.extensions", "io.delta.sql.DeltaSparkSessionExtension")
         .config("spark.sql.catalog.spark_catalog", "org.apache.spark.sql.delta.catalog.DeltaCatalog"))
    for k, v in conf.items():
        b = b.config(k, v)
    spark = configure_spark_with_delta_pip(b).getOrCreate()
    spark.sparkContext.setLogLevel("ERROR")
    t1 = time.perf_counter()
    path = sys.argv[1]
""").replace("@MASTER@", MASTER)

BUILD = SESSION + textwrap.dedent("""
    parts, files, rows = int(sys.argv[3]), int(sys.argv[4]), int(sys.argv[5])
    spark.sql(f"CREATE TABLE delta.`{path}` (id BIGINT, p STRING, v DOUBLE, s STRING) USING delta PARTITIONED BY (p)")
    # `files` slices of contiguous ids, each covering every partition: one file per (task, partition), no shuffle
    (spark.range(0, parts * files * rows, 1, files)
     .selectExpr("id", f"format_string('p%03d', CAST(id % {parts} AS INT)) AS p", "rand(7) AS v",
                 "sha2(CAST(id AS STRING), 256) AS s")
     .write.format("delta").mode("append").save(path))
""")

OPTIMIZE = SESSION + textwrap.dedent("""
    spark.conf.set("spark.databricks.delta.optimize.maxFileSize", str(@TARGET@))
    spark.sql(f"OPTIMIZE delta.`{path}`").collect()
    print(json.dumps({"session_s": t1 - t0, "work_s": time.perf_counter() - t1}))
""").replace("@TARGET@", str(TARGET))

NO_SHUFFLE = SESSION + textwrap.dedent("""
    from pyspark.sql import functions as F
    spark.conf.set("spark.sql.files.maxPartitionBytes", str(@TARGET@))
    spark.conf.set("spark.sql.files.openCostInBytes", "1")
    parts = [r[0] for r in spark.read.format("delta").load(path).select("p").distinct().collect()]
    for p in sorted(parts):
        (spark.read.format("delta").load(path).where(F.col("p") == p)
         .write.format("delta").mode("overwrite").option("replaceWhere", f"p = '{p}'")
         .option("dataChange", "false").save(path))
    print(json.dumps({"session_s": t1 - t0, "work_s": time.perf_counter() - t1, "partitions": len(parts)}))
""").replace("@TARGET@", str(TARGET))

SIDES = ("compactor rewrite", "compactor optimize", "delta-spark OPTIMIZE", "no-shuffle rewrite")


def make_project(root: Path, table: Path, method: str) -> Path:
    (root / "policies").mkdir(parents=True, exist_ok=True)
    (root / "compactor.yml").write_text("name: bench\nprofile: bench\n")
    spark = {"master": MASTER, "conf": {k: v for k, v in CONF.items() if k != "spark.ui.enabled"},
             "delta_jars": True}
    (root / "profiles.yml").write_text("bench:\n  target: t\n  outputs:\n    t:\n      engine: spark\n"
                                       f"      spark: {json.dumps(spark)}\n")
    (root / "policies" / "t.yml").write_text(
        f"version: 1\ntables:\n  - name: t\n    path: {table}\n    compaction:\n"
        f"      target_file_size: {TARGET}\n      method: {method}\n      triggers: {{min_input_files: 2}}\n")
    return root


def facts(path: Path) -> dict[str, int]:
    """Live files, rows and sum(id) of a table, read with delta-rs (a third reader)."""
    import pyarrow.compute as pc
    from deltalake import DeltaTable

    dt = DeltaTable(str(path))
    t = dt.to_pyarrow_table(columns=["id"])
    return {"files": len(dt.file_uris()), "rows": t.num_rows, "sum_id": int(pc.sum(t["id"]).as_py() or 0),
            "version": dt.version()}


def run_side(side: str, copy: Path, work: Path) -> tuple[float, dict]:
    env = {**os.environ, "COMPACTOR_WATCH_WINDOW": "0"}
    if side.startswith("compactor"):
        proj = make_project(work / "proj", copy, side.split()[1])
        cmd = [sys.executable, "-m", "compactor", "apply", "--auto-approve", "--project-dir", str(proj),
               "--format", "json"]
    else:
        conf = dict(CONF)
        if side == "no-shuffle rewrite":
            conf["spark.default.parallelism"] = "1"
        cmd = [sys.executable, "-c", OPTIMIZE if side == "delta-spark OPTIMIZE" else NO_SHUFFLE, str(copy),
               json.dumps(conf)]
    t0 = time.perf_counter()
    p = subprocess.run(cmd, capture_output=True, text=True, env=env)
    elapsed = time.perf_counter() - t0
    if p.returncode != 0:
        raise SystemExit(f"{side} failed ({p.returncode}):\n{p.stdout[-3000:]}\n{p.stderr[-3000:]}")
    info: dict = {}
    if not side.startswith("compactor"):
        info = json.loads(p.stdout.strip().splitlines()[-1])
    else:  # where compactor's time went: its actions (from run_results.json) vs the rest of the process
        results = [r for f in (work / "proj").rglob("run_results.json") for r in json.loads(f.read_text())["results"]]
        durations = [float(r["duration_s"]) for r in results]
        if durations:
            info = {"actions": len(durations), "actions_s": round(sum(durations), 1),
                    "action_median_s": round(statistics.median(durations), 2)}
    return elapsed, info


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--partitions", type=int, default=50)
    ap.add_argument("--files", type=int, default=40, help="files per partition")
    ap.add_argument("--rows", type=int, default=1000, help="rows per file")
    ap.add_argument("--keep", action="store_true", help="keep the work directory")
    ap.add_argument("--sides", default=",".join(SIDES), help="comma-separated subset of: " + ", ".join(SIDES))
    args = ap.parse_args()
    base = Path(tempfile.mkdtemp(prefix="compactor-spark-compare-"))
    master = base / "master"
    t0 = time.perf_counter()
    p = subprocess.run([sys.executable, "-c", BUILD, str(master), json.dumps(CONF), str(args.partitions),
                        str(args.files), str(args.rows)], capture_output=True, text=True)
    if p.returncode != 0:
        raise SystemExit(f"building the table failed:\n{p.stderr[-3000:]}")
    original = facts(master)
    size = sum(f.stat().st_size for f in master.rglob("*.parquet"))
    print(f"built in {time.perf_counter() - t0:.0f}s: {original['files']} files, {original['rows']:,} rows, "
          f"{size / 2**20:.1f} MiB of parquet", file=sys.stderr)
    assert original["files"] == args.partitions * args.files, original

    sides = tuple(s for s in SIDES if s in args.sides.split(","))
    times: dict[str, list[float]] = {s: [] for s in sides}
    infos: dict[str, list[dict]] = {s: [] for s in sides}
    for i in range(args.repeat):
        order = sides[i % len(sides):] + sides[:i % len(sides)]  # rotate: each side takes every position
        if i % 2:
            order = tuple(reversed(order))
        for side in order:
            work = base / f"{i}-{side.replace(' ', '_')}"
            copy = work / "t"
            work.mkdir()
            shutil.copytree(master, copy)
            elapsed, info = run_side(side, copy, work)
            after = facts(copy)
            ok = (after["rows"] == original["rows"] and after["sum_id"] == original["sum_id"]
                  and after["files"] == args.partitions)
            print(f"run {i} {side}: {elapsed:.1f}s, {original['files']} -> {after['files']} files, "
                  f"{after['rows']:,} rows, {after['version'] - original['version']} commits"
                  f"{'' if ok else '  <-- DID NOT DO THE JOB'} {json.dumps(info) if info else ''}",
                  file=sys.stderr, flush=True)
            if not ok:
                raise SystemExit(f"{side}: {after} vs {original}")
            times[side].append(elapsed)
            infos[side].append({**after, "info": info})
            shutil.rmtree(work, ignore_errors=True)

    fastest = min(statistics.median(times[s]) for s in sides if not s.startswith("compactor")) \
        if any(not s.startswith("compactor") for s in sides) else float("nan")
    print(f"\n{args.partitions} partitions x {args.files} files x {args.rows} rows "
          f"({original['rows']:,} rows, {size / 2**20:.1f} MiB), median of {args.repeat}\n")
    print("| side | median (s) | runs (s) | files after | commits | vs fastest non-compactor | last run |")
    print("|---|---:|---|---:|---:|---:|---|")
    for s in sides:
        med = statistics.median(times[s])
        runs = ", ".join(f"{t:.1f}" for t in times[s])
        last = infos[s][-1]
        print(f"| {s} | {med:.1f} | {runs} | {last['files']} | {last['version'] - original['version']} | "
              f"{med / fastest:.2f}x | {json.dumps(last.get('info', {}))} |")
    if not args.keep:
        shutil.rmtree(base, ignore_errors=True)


if __name__ == "__main__":
    main()
