"""Spark at scale: compactor's spark engine (its default settings) vs delta-spark OPTIMIZE on a table of
200 partitions x 10 small files, on ``local[2]``, on a standalone cluster (tests/cluster.py: a master
and two 1-core workers on 127.0.0.1), and over Spark Connect (``connect``: one running server, local[2]
with Delta, started once by tests/spark_connect.py; every side is a client process, so no side starts a
JVM and the figures compare the Spark work itself).

The table is written once by Spark (Delta jars, local[2]): 10 appends of one task each, so every append
writes one file into each of the 200 partitions (500 rows per file). Every timed run gets a fresh copy.

Sides (each one whole process, interpreter and JVM start included; the plan is made beforehand, untimed):
- ``compactor``: ``python -m compactor apply plan.json --project-dir P`` with a profile ``engine: spark``,
  ``spark.master`` = the environment's master, ``COMPACTOR_WATCH_WINDOW=0``, the policy's default
  ``method`` (``--method rewrite|optimize|auto`` writes one), and the engine's own concurrency settings.
- ``sequential``: the same, with a profile that makes the engine rewrite one bin at a time and commit
  every bin on its own: ``threads: 1`` and, where the profile schema has them,
  ``max_concurrent_rewrites: 1`` and ``commit_every_bins: 1`` (each key written only if
  compactor/schemas/profiles.schema.json accepts it). The "old sequential engine" reference.
- ``optimize``: a script building the same session (``build_session``, Delta jars) and running
  ``OPTIMIZE delta.`<copy>``` with maxFileSize/minFileSize = the policy's target size (over Spark
  Connect: a client session on the server, the same SQL and settings).

Sides alternate (the order rotates each round); the figure is the median of ``--repeat`` runs. After
every run the table is checked (untimed): 200 live files, every id exactly once.

The driver's class archive (compactor/engines/spark_class_archive.py) is noted by a machine's first
spark start and made by its second, which runs about 10 s slower: ``--class-archive warm`` (the default)
runs the compactor side twice, untimed, before the timed rounds of each environment that starts a local
JVM, so every timed run finds it made (the steady state of a machine that keeps its cache folder);
``off`` turns it off for every side (a fresh container's figures); ``as-is`` leaves the cache as it is.

    python bench/spark_scale.py [--repeat 3] [--envs local,cluster,connect] [--sides compactor,sequential,optimize]
                                [--method default|rewrite|optimize|auto] [--class-archive warm|off|as-is]
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

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

PARTITIONS, APPENDS, ROWS = 200, 10, 500
TARGET = 64 * 2**20
BASE_CONF = {"spark.ui.showConsoleProgress": "false"}
#: the cluster driver: one 1-core executor per worker (the harness's DRIVER_CONF minus the test-only
#: partition counts, so both environments run Spark's defaults)
CLUSTER_CONF = {"spark.executor.memory": "1g", "spark.executor.cores": "1", "spark.cores.max": "2",
                "spark.driver.host": "127.0.0.1", "spark.driver.bindAddress": "127.0.0.1"}
#: profile keys of the sequential side, in the order tried; each is written only if the schema has it
SEQUENTIAL_KEYS = {"threads": 1, "max_concurrent_rewrites": 1, "commit_every_bins": 1}

BUILD = textwrap.dedent("""
    import sys
    from pyspark.sql import functions as F
    from compactor.formats.delta.spark import build_session
    spark = build_session("local[2]", "build", {"spark.ui.showConsoleProgress": "false"}, delta_jars=True)
    path, parts, appends, rows = sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), int(sys.argv[4])
    per_append = parts * rows
    for a in range(appends):
        (spark.range(a * per_append, (a + 1) * per_append, numPartitions=1)
         .withColumn("part", F.format_string("p%03d", F.col("id") % parts))
         .withColumn("v", F.col("id").cast("double") / 7)
         .withColumn("s", F.concat(F.lit("row-"), F.col("id").cast("string")))
         .write.format("delta").partitionBy("part").mode("append").save(path))
    spark.stop()
""")

OPTIMIZE = textwrap.dedent("""
    import json, sys
    path, master, conf, target = sys.argv[1], sys.argv[2], json.loads(sys.argv[3]), sys.argv[4]
    size = {"spark.databricks.delta.optimize.maxFileSize": target,
            "spark.databricks.delta.optimize.minFileSize": target}
    if master.startswith("sc://"):  # a client of a running Spark Connect server
        from pyspark.sql import SparkSession
        spark = SparkSession.builder.remote(master).getOrCreate()
        for k, v in size.items():
            spark.conf.set(k, v)
    else:
        from compactor.formats.delta.spark import build_session
        spark = build_session(master, "optimize", {**conf, **size}, delta_jars=True)
    m = spark.sql(f"OPTIMIZE delta.`{path}`").collect()[0]["metrics"]
    print(json.dumps({"added": m["numFilesAdded"], "removed": m["numFilesRemoved"], "bins": m["numBins"]}))
    spark.stop()
""")


def profile_keys() -> set[str]:
    """The keys a profile output accepts (compactor's packaged profiles schema)."""
    schema = json.loads((REPO / "compactor" / "schemas" / "profiles.schema.json").read_text())
    output = schema["additionalProperties"]["properties"]["outputs"]["additionalProperties"]
    return set(output["properties"])


def sequential_settings() -> dict[str, int]:
    accepted = profile_keys()
    return {k: v for k, v in SEQUENTIAL_KEYS.items() if k in accepted}


def build(path: Path) -> None:
    subprocess.run([sys.executable, "-c", BUILD, str(path), str(PARTITIONS), str(APPENDS), str(ROWS)], check=True,
                   capture_output=True, cwd=path.parent, env=_env())


#: --class-archive: "warm", "off" or "as-is"
CLASS_ARCHIVE = "warm"


def _env() -> dict[str, str]:
    off = {"COMPACTOR_SPARK_CLASS_ARCHIVE": "0"} if CLASS_ARCHIVE == "off" else {}
    return {**os.environ, "COMPACTOR_WATCH_WINDOW": "0", **off,
            "PYTHONPATH": os.pathsep.join([str(REPO), *filter(None, [os.environ.get("PYTHONPATH")])])}


#: the policy's compaction.method ("default": none written, the policy's default applies)
METHOD = "default"


def make_project(root: Path, table: Path, master: str, conf: dict[str, str], extra: dict[str, int]) -> Path:
    (root / "policies").mkdir(parents=True, exist_ok=True)
    (root / "compactor.yml").write_text("name: bench\nprofile: bench\n")
    keys = "".join(f"      {k}: {v}\n" for k, v in extra.items())
    where = f"remote: \"{master}\"" if master.startswith("sc://") else f"master: \"{master}\""
    (root / "profiles.yml").write_text(
        "bench:\n  target: t\n  outputs:\n    t:\n      engine: spark\n      watch_window: 0\n" + keys +
        f"      spark:\n        {where}\n        conf: {json.dumps(conf)}\n")
    (root / "policies" / "t.yml").write_text(
        f"version: 1\ntables:\n  - name: t\n    path: {table}\n    compaction:\n"
        + ("" if METHOD == "default" else f"      method: {METHOD}\n") +
        f"      target_file_size: {TARGET}\n      triggers: {{min_input_files: 2}}\n")
    return root


def check(table: Path) -> None:
    import pyarrow.parquet as pq
    from deltalake import DeltaTable

    uris = DeltaTable(str(table)).file_uris()
    assert len(uris) == PARTITIONS, f"{len(uris)} live files, expected {PARTITIONS}"
    ids = sorted(i for u in uris for i in pq.ParquetFile(u).read(columns=["id"]).column("id").to_pylist())
    assert ids == list(range(PARTITIONS * APPENDS * ROWS)), "rows lost or duplicated"


def run_side(side: str, base: Path, master_table: Path, master: str, conf: dict[str, str], tag: str) -> float:
    work = base / tag
    copy = work / "t"
    shutil.copytree(master_table, copy)
    proj = make_project(work / "proj", copy, master, conf, sequential_settings() if side == "sequential" else {})
    plan = proj / "target" / "plan.json"
    subprocess.run([sys.executable, "-m", "compactor", "plan", "--project-dir", str(proj), "--out", str(plan)],
                   check=True, capture_output=True, cwd=work, env=_env())
    if side in ("compactor", "sequential"):
        cmd = [sys.executable, "-m", "compactor", "apply", str(plan), "--project-dir", str(proj)]
    elif side == "optimize":
        cmd = [sys.executable, "-c", OPTIMIZE, str(copy), master, json.dumps(conf), str(TARGET)]
    else:
        raise SystemExit(f"unknown side {side}")
    t0 = time.perf_counter()
    p = subprocess.run(cmd, capture_output=True, text=True, cwd=work, env=_env())
    took = time.perf_counter() - t0
    if p.returncode != 0:
        raise RuntimeError(f"{side} failed ({p.returncode}):\n{p.stdout[-2000:]}\n{p.stderr[-4000:]}")
    check(copy)
    print(json.dumps({"side": side, "tag": tag, "seconds": round(took, 2), "out": p.stdout.strip()[-300:]}),
          file=sys.stderr, flush=True)
    shutil.rmtree(work, ignore_errors=True)
    return took


def bench(env: str, sides: list[str], base: Path, master_table: Path, master: str, conf: dict[str, str],
          repeat: int) -> dict[str, list[float]]:
    times: dict[str, list[float]] = {s: [] for s in sides}
    if CLASS_ARCHIVE == "warm" and not master.startswith("sc://"):
        for i in range(2):  # the first notes the archive's key, the second makes it (its JVM writes it as it exits)
            run_side("compactor", base, master_table, master, conf, f"{env}-warm-{i}")
    for i in range(repeat):
        order = sides[i % len(sides):] + sides[:i % len(sides)]
        for side in order:
            times[side].append(run_side(side, base, master_table, master, conf, f"{env}-{side}-{i}"))
    return times


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--envs", default="local,cluster")
    ap.add_argument("--sides", default="compactor,sequential,optimize")
    ap.add_argument("--keep", action="store_true")
    ap.add_argument("--method", default="default", choices=["default", "rewrite", "optimize", "auto"])
    ap.add_argument("--class-archive", default="warm", choices=["warm", "off", "as-is"])
    args = ap.parse_args()
    global METHOD, CLASS_ARCHIVE
    METHOD = args.method
    CLASS_ARCHIVE = args.class_archive
    sides = args.sides.split(",")
    print(f"sequential profile keys: {sequential_settings()}", file=sys.stderr, flush=True)
    base = Path(tempfile.mkdtemp(prefix="compactor-spark-scale-"))
    master_table = base / "master"
    t0 = time.time()
    build(master_table)
    check_files = len(list(master_table.rglob("*.parquet")))
    print(f"built {check_files} files in {time.time() - t0:.0f}s", file=sys.stderr, flush=True)
    results: dict[str, dict[str, list[float]]] = {}
    try:
        for env in args.envs.split(","):
            if env == "local":
                results[env] = bench(env, sides, base, master_table, "local[2]", BASE_CONF, args.repeat)
            elif env == "connect":
                from tests.spark_connect import connect_server

                with connect_server(base / "connect") as server:
                    print(f"Spark Connect server up in {server.started_s:.1f}s", file=sys.stderr, flush=True)
                    results[env] = bench(env, sides, base, master_table, server.url, {}, args.repeat)
            else:
                from tests.cluster import standalone_cluster

                with standalone_cluster(base / "cluster") as c:
                    results[env] = bench(env, sides, base, master_table, c.master_url, {**BASE_CONF, **CLUSTER_CONF},
                                         args.repeat)
    finally:
        print(json.dumps(results), file=sys.stderr)
        if not args.keep:
            shutil.rmtree(base, ignore_errors=True)
    print("| environment | side | runs (s) | median (s) |")
    print("|---|---|---|---:|")
    for env, per in results.items():
        for side, ts in per.items():
            print(f"| {env} | {side} | {', '.join(f'{t:.1f}' for t in ts)} | {statistics.median(ts):.1f} |")
    for env, per in results.items():
        med = {s: statistics.median(ts) for s, ts in per.items()}
        if "sequential" in med and "compactor" in med:
            print(f"{env}: sequential / compactor = {med['sequential'] / med['compactor']:.2f}x")
        if "optimize" in med and "compactor" in med:
            print(f"{env}: compactor / optimize = {med['compactor'] / med['optimize']:.2f}x")


if __name__ == "__main__":
    main()
