"""compactor's local purge against delta-spark's ``REORG TABLE ... APPLY (PURGE)``, whole process each (issue
40's goal: <= 0.3x), on one delta-spark-written table with deletion vectors: PARTITIONS partitions x FILES
files (written in one commit: FILES write tasks, each one file into every partition; a row's partition is
pmod(hash(id), PARTITIONS), so every partition holds every id mod 10), then a DELETE of 20% of the rows and a
MERGE deleting 10% more, which leave every file with a deletion vector (30% of its rows dead).

Two sides, each on a fresh copy of that table, each a fresh Python process, alternating A B A B (1 warm-up
pair not counted, then PAIRS pairs), ratio per pair:

- ``compactor``: ``compactor apply --auto-approve`` (plan and apply) with the local engine (the default, no
  JVM) and a policy that only purges (``compaction.enabled: false``, ``purge: {enabled: true}``, ratio 0.05):
  one purge per partition, each partition's files rewritten without their deleted rows, one commit each;
- ``REORG``: a bare Python process that starts Spark (``local[2]``, 2 GiB driver, UI off) with the Delta
  jars only and runs ``REORG TABLE delta.`t` APPLY (PURGE)`` once over the whole table.

Both pack to the same target (compactor's ``target_file_size``, delta-spark's ``optimize.maxFileSize``:
128 MiB), so each rewrites every partition's files into one. After each run the copy is read with delta-rs,
vectors applied: rows and sum(id) must be the table's live rows, no deletion vector may remain, else the run
does not count. COMPACTOR_WATCH_WINDOW=0 (the post-commit watch is a wait).

    python bench/delta_purge_compare.py [--pairs 4] [--partitions 20] [--files 10] [--rows 10000] [--master DIR]

``--master DIR``: the table is built there unless it already is (then reused: every run works on a copy).
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

TARGET = 128 * 2**20
CONF = {"spark.driver.memory": "2g", "spark.ui.enabled": "false", "spark.sql.shuffle.partitions": "2"}
ROOT = Path(__file__).resolve().parents[1]

SESSION = textwrap.dedent("""
    import json, sys, time
    t0 = time.perf_counter()
    sys.path.insert(0, @ROOT@)
    from compactor.formats.delta.spark import build_session
    spark = build_session("local[2]", "purge-bench", json.loads(sys.argv[2]), delta_jars=True)
    spark.sparkContext.setLogLevel("ERROR")
    t1 = time.perf_counter()
    path = sys.argv[1]
""").replace("@ROOT@", repr(str(ROOT)))

BUILD = SESSION + textwrap.dedent("""
    parts, files, rows = int(sys.argv[3]), int(sys.argv[4]), int(sys.argv[5])
    spark.sql(f"CREATE TABLE delta.`{path}` (id BIGINT, p INT, v DOUBLE, s STRING) USING delta PARTITIONED BY (p) "
              "TBLPROPERTIES ('delta.enableDeletionVectors' = 'true')")
    (spark.range(0, parts * files * rows, 1, files)
     .selectExpr("id", f"CAST(pmod(hash(id), {parts}) AS INT) AS p", "rand(7) AS v", "sha2(CAST(id AS STRING), 256) AS s")
     .write.format("delta").mode("append").save(path))
    spark.sql(f"DELETE FROM delta.`{path}` WHERE id % 10 IN (0, 1)")
    spark.range(0, parts * files * rows).where("id % 10 = 2").createOrReplaceTempView("gone")
    spark.sql(f"MERGE INTO delta.`{path}` t USING gone s ON t.id = s.id WHEN MATCHED THEN DELETE")
""")

REORG = SESSION + textwrap.dedent("""
    spark.conf.set("spark.databricks.delta.optimize.maxFileSize", str(@TARGET@))
    spark.sql(f"REORG TABLE delta.`{path}` APPLY (PURGE)").collect()
    print(json.dumps({"session_s": round(t1 - t0, 1), "work_s": round(time.perf_counter() - t1, 1)}))
""").replace("@TARGET@", str(TARGET))

SIDES = ("compactor", "REORG")


def make_project(root: Path, table: Path) -> Path:
    (root / "policies").mkdir(parents=True, exist_ok=True)
    (root / "compactor.yml").write_text("name: bench\n")
    (root / "policies" / "t.yml").write_text(
        f"version: 1\ntables:\n  - name: t\n    path: {table}\n    compaction:\n      enabled: false\n"
        f"      target_file_size: {TARGET}\n      purge: {{enabled: true, min_deleted_ratio: 0.05}}\n")
    return root


def facts(path: Path) -> dict[str, int]:
    """Live rows (vectors applied) and sum(id), read with delta-rs, the live files and the deletion vectors
    left (compactor's log replay)."""
    import pyarrow as pa
    from deltalake import DeltaTable, QueryBuilder

    sys.path.insert(0, str(ROOT))
    from compactor.formats.delta.read.log_replay import replay
    from compactor.models.table import TableLocation

    dt = DeltaTable(str(path))
    got = pa.table(QueryBuilder().register("t", dt).execute("select count(*) AS n, sum(id) AS s from t").read_all())
    r = replay(TableLocation(str(path)))
    return {"rows": int(got["n"][0].as_py()), "sum_id": int(got["s"][0].as_py() or 0), "files": len(r.live),
            "vectors": len(r.deletion_vectors), "version": dt.version()}


def run_side(side: str, copy: Path, work: Path) -> tuple[float, dict]:
    env = {**os.environ, "COMPACTOR_WATCH_WINDOW": "0", "PYTHONPATH": str(ROOT)}
    if side == "compactor":
        cmd = [sys.executable, "-m", "compactor", "apply", "--auto-approve", "--project-dir",
               str(make_project(work / "proj", copy)), "--format", "json"]
    else:
        cmd = [sys.executable, "-c", REORG, str(copy), json.dumps(CONF)]
    t0 = time.perf_counter()
    p = subprocess.run(cmd, capture_output=True, text=True, env=env)
    elapsed = time.perf_counter() - t0
    if p.returncode != 0:
        raise SystemExit(f"{side} failed ({p.returncode}):\n{p.stdout[-3000:]}\n{p.stderr[-3000:]}")
    if side != "compactor":
        return elapsed, json.loads(p.stdout.strip().splitlines()[-1])
    results = [r for f in (work / "proj").rglob("run_results.json") for r in json.loads(f.read_text())["results"]]
    return elapsed, {"actions": len(results), "statuses": sorted({r["status"] for r in results}),
                     "actions_s": round(sum(float(r["duration_s"]) for r in results), 1)}


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--pairs", type=int, default=4, help="pairs counted (after one warm-up pair)")
    ap.add_argument("--partitions", type=int, default=20)
    ap.add_argument("--files", type=int, default=10, help="files per partition")
    ap.add_argument("--rows", type=int, default=10000, help="rows per file")
    ap.add_argument("--master", type=Path, help="where the table is built, or was built by an earlier run")
    ap.add_argument("--keep", action="store_true", help="keep the work directory")
    args = ap.parse_args()
    base = Path(tempfile.mkdtemp(prefix="compactor-purge-compare-"))
    master = args.master or base / "master"
    t0 = time.perf_counter()
    if not (master / "_delta_log").is_dir():
        p = subprocess.run([sys.executable, "-c", BUILD, str(master), json.dumps(CONF), str(args.partitions),
                            str(args.files), str(args.rows)], capture_output=True, text=True)
        if p.returncode != 0:
            raise SystemExit(f"building the table failed:\n{p.stderr[-3000:]}")
    original = facts(master)
    size = sum(f.stat().st_size for f in master.rglob("*.parquet"))
    print(f"built or found in {time.perf_counter() - t0:.0f}s: {original['files']} files, {original['vectors']} with a "
          f"deletion vector, {original['rows']:,} live rows of {args.partitions * args.files * args.rows:,}, "
          f"{size / 2**20:.1f} MiB of parquet", file=sys.stderr)
    assert original["files"] == original["vectors"] == args.partitions * args.files, original

    times: dict[str, list[float]] = {s: [] for s in SIDES}
    infos: dict[str, list[dict]] = {s: [] for s in SIDES}
    for i in range(args.pairs + 1):
        for side in SIDES if i % 2 == 0 else tuple(reversed(SIDES)):
            work = base / f"{i}-{side}"
            copy = work / "t"
            work.mkdir()
            shutil.copytree(master, copy)
            elapsed, info = run_side(side, copy, work)
            after = facts(copy)
            ok = after["rows"] == original["rows"] and after["sum_id"] == original["sum_id"] and not after["vectors"]
            print(f"{'warm-up' if i == 0 else f'pair {i}'} {side}: {elapsed:.1f}s, {original['files']} -> "
                  f"{after['files']} files, {after['vectors']} vectors left, {after['rows']:,} rows, "
                  f"{after['version'] - original['version']} commit(s){'' if ok else '  <-- DID NOT DO THE JOB'} "
                  f"{json.dumps(info)}", file=sys.stderr, flush=True)
            if not ok:
                raise SystemExit(f"{side}: {after} vs {original}")
            if i:
                times[side].append(elapsed)
                infos[side].append(info)
            shutil.rmtree(work, ignore_errors=True)

    ratios = [c / r for c, r in zip(times["compactor"], times["REORG"])]
    if not ratios:  # --pairs 0: the table built and one warm-up pair run
        return
    print(f"\n{args.partitions} partitions x {args.files} files x {args.rows:,} rows ({size / 2**20:.1f} MiB, "
          f"{original['rows']:,} live rows), {args.pairs} pairs after a warm-up\n")
    print("| pair | compactor (s) | REORG (s) | ratio |")
    print("|---:|---:|---:|---:|")
    for k, (c, r, q) in enumerate(zip(times["compactor"], times["REORG"], ratios), 1):
        print(f"| {k} | {c:.1f} | {r:.1f} | {q:.2f}x |")
    print(f"| median | {statistics.median(times['compactor']):.1f} | {statistics.median(times['REORG']):.1f} | "
          f"{statistics.median(ratios):.2f}x |")
    print(f"\nREORG's process: {json.dumps(infos['REORG'][-1])}; compactor's: {json.dumps(infos['compactor'][-1])}")
    if not args.keep:
        shutil.rmtree(base, ignore_errors=True)


if __name__ == "__main__":
    main()
