"""Driver scripts for the standalone test cluster (run in a subprocess: the pytest process already holds a
local SparkContext). Each prints ``app <application id>`` as soon as its session is up, then one JSON line
``result {...}`` at the end.

    python tests/cluster/driver.py roundtrip <master_url> <table_dir> [--rows N]
    python tests/cluster/driver.py slow_write <master_url> <out_dir> --tasks N --task-seconds S [--single]
    python tests/cluster/driver.py serve <master_url>

``serve`` keeps one session (one application on the cluster) for many requests: it prints ``app <id>``
and ``ready <executors>``, then reads one JSON request a line from stdin and answers each with one
``result {...}`` line (the tests' session-scoped driver, tests/cluster/conftest.py):

    {"op": "apply", "plan": "<plan.json>", "target": {"commit_every_bins": 4}}
                                             compactor's apply_plan with the spark engine on this session
    {"op": "executors", "wait_for": 2}       executors registered (waiting up to 120 s for ``wait_for``)
    {"op": "quit"}
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))))

from tests.cluster import cluster_session  # noqa: E402


def _say(*parts: object) -> None:
    print(*parts, flush=True)


def _executors(spark) -> int:
    """Executors registered with the driver (the status tracker lists the driver too)."""
    return len(spark.sparkContext._jsc.sc().statusTracker().getExecutorInfos()) - 1


def roundtrip(args: argparse.Namespace) -> dict:
    """Write a partitioned Delta table in 8 tasks, read it back, and report what came back."""
    t0 = time.monotonic()
    spark = cluster_session(args.master, "compactor-cluster-roundtrip")
    _say("app", spark.sparkContext.applicationId)
    times = {"session": time.monotonic() - t0}
    from pyspark.sql import functions as F

    from compactor.formats.delta.spark import delta_sql_enabled

    if not delta_sql_enabled(spark):
        return {"delta": False}
    # wait for both executors, so the 8 tasks can spread over both workers
    deadline = time.monotonic() + 120
    while _executors(spark) < 2 and time.monotonic() < deadline:
        time.sleep(0.5)
    times["executors"] = time.monotonic() - t0
    df = (spark.range(0, args.rows, numPartitions=8)
          .withColumn("part", (F.col("id") % 4).cast("string"))
          .withColumn("v", F.col("id").cast("double") * 0.5))
    df.write.format("delta").partitionBy("part").save(args.table)
    times["write"] = time.monotonic() - t0
    back = spark.read.format("delta").load(args.table)
    agg = back.agg(F.count("*").alias("n"), F.countDistinct("id").alias("d"), F.sum("id").alias("s"),
                   F.min("id").alias("lo"), F.max("id").alias("hi"), F.sum("v").alias("sv")).collect()[0]
    out = {"delta": True, "count": agg["n"], "distinct": agg["d"], "sum": agg["s"], "min": agg["lo"],
           "max": agg["hi"], "sum_v": agg["sv"], "executors": _executors(spark),
           "parts": sorted(r["part"] for r in back.select("part").distinct().collect())}
    times["read"] = time.monotonic() - t0
    out["seconds"] = {k: round(v, 1) for k, v in times.items()}
    spark.stop()
    return out


def slow_write(args: argparse.Namespace) -> dict:
    """A parquet write of ``tasks`` tasks that each sleep ``task_seconds`` before producing their rows
    (``--single``: compactor's shape, one task via coalesce(1) over ``tasks`` input partitions)."""
    spark = cluster_session(args.master, "compactor-cluster-slow-write", delta_jars=False)
    spark.sparkContext.setLogLevel(args.log_level)
    _say("app", spark.sparkContext.applicationId)
    deadline = time.monotonic() + 120
    while _executors(spark) < 2 and time.monotonic() < deadline:
        time.sleep(0.5)
    _say("executors", _executors(spark))
    pause, per_task = args.task_seconds, args.rows // args.tasks

    def slow(split, _):  # runs in the executors' Python workers (plain RDD: no pandas/Arrow needed)
        import time as _t

        _t.sleep(pause)
        for i in range(split * per_task, (split + 1) * per_task):
            yield (i, float(i))

    rdd = spark.sparkContext.parallelize(range(args.tasks), args.tasks).mapPartitionsWithIndex(slow)
    df = spark.createDataFrame(rdd, "id long, v double")
    if args.single:
        df = df.coalesce(1)
    t0 = time.monotonic()
    error = None
    try:
        df.write.mode("errorifexists").parquet(args.out)
    except Exception as e:  # noqa: BLE001 - reported, the parent decides
        error = str(e).splitlines()[0][:500]
    seconds = time.monotonic() - t0
    out = {"seconds": round(seconds, 2), "write_end_epoch": time.time(), "error": error}
    if error is None:
        back = spark.read.parquet(args.out)
        out.update(rows=back.count(), distinct=back.distinct().count())
    spark.stop()
    return out


def _apply(spark, req: dict) -> dict:
    """apply_plan on the plan file with a spark engine reusing this session (no watch window)."""
    from compactor.engines.spark import SparkEngine
    from compactor.project.model import Target
    from compactor.tasks.apply import apply_plan
    from compactor.tasks.plan_file import load_plan

    # request "target": Target fields (commit_every_bins, threads, ...) on top of the test defaults
    target = Target(engine="spark", watch_window_s=0.0, **req.get("target", {}))
    engine = SparkEngine(target)
    t0 = time.monotonic()
    try:
        run = apply_plan(load_plan(req["plan"]), target=target, engine=engine)
    except Exception as e:  # noqa: BLE001 - reported to the test, which decides
        return {"raised": f"{type(e).__name__}: {e}"[:2000], "seconds": round(time.monotonic() - t0, 2)}
    finally:
        engine.close()  # does not stop a session it did not create
    return {"ok": run.ok, "seconds": round(time.monotonic() - t0, 2),
            "results": [{"partition": dict(r.partition), "type": r.type, "status": r.status, "error": r.error,
                         "files_removed": r.files_removed, "files_added": r.files_added,
                         "version_after": r.table_version_after} for r in run.results]}


def _wait_executors(spark, n: int, timeout: float = 120.0) -> int:
    deadline = time.monotonic() + timeout
    while _executors(spark) < n and time.monotonic() < deadline:
        time.sleep(0.2)
    return _executors(spark)


def serve(args: argparse.Namespace) -> None:
    """One session, many requests (stdin -> stdout, one JSON line each); see the module docstring."""
    spark = cluster_session(args.master, "compactor-cluster-tests", delta_jars=False)
    spark.sparkContext.setLogLevel(args.log_level)
    _say("app", spark.sparkContext.applicationId)
    _say("ready", _wait_executors(spark, 2))
    try:
        for line in sys.stdin:
            if not line.strip():
                continue
            req = json.loads(line)
            if req["op"] == "quit":
                break
            if req["op"] == "apply":
                out = _apply(spark, req)
            elif req["op"] == "executors":
                out = {"executors": _wait_executors(spark, int(req.get("wait_for", 0)))}
            else:
                out = {"raised": f"unknown op {req['op']}"}
            _say("result", json.dumps(out))
    finally:
        spark.stop()


def main() -> None:
    ap = argparse.ArgumentParser()
    sub = ap.add_subparsers(dest="cmd", required=True)
    r = sub.add_parser("roundtrip")
    r.add_argument("master")
    r.add_argument("table")
    r.add_argument("--rows", type=int, default=10_000)
    s = sub.add_parser("slow_write")
    s.add_argument("master")
    s.add_argument("out")
    s.add_argument("--tasks", type=int, default=12)
    s.add_argument("--task-seconds", type=float, default=3.0)
    s.add_argument("--rows", type=int, default=120_000)
    s.add_argument("--single", action="store_true")
    s.add_argument("--log-level", default="ERROR", help="WARN shows lost tasks and their retries")
    v = sub.add_parser("serve")
    v.add_argument("master")
    v.add_argument("--log-level", default="WARN", help="WARN logs lost executors and task retries")
    args = ap.parse_args()
    if args.cmd == "serve":
        serve(args)
        return
    result = {"roundtrip": roundtrip, "slow_write": slow_write}[args.cmd](args)
    _say("result", json.dumps(result))


if __name__ == "__main__":
    main()
