"""SIGKILL at random points of a spark-engine apply: every row exactly once after each kill, and a
re-run converges and leaves no staging folders or journals behind."""

from __future__ import annotations

import os
import random
import signal
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest

from compactor.engines.spark import SparkEngine
from compactor.project.model import Target
from compactor.tasks.apply import apply_plan
from compactor.tasks.plan_file import write_plan
from tests.apply.helpers import exactly_once, make_table, plan_for

KILLS = 10
SPARK = Target(engine="spark")

SCRIPT = textwrap.dedent("""
    import sys
    from pyspark.sql import SparkSession
    spark = (SparkSession.builder.master("local[1]").config("spark.ui.enabled", "false")
             .config("spark.driver.memory", "512m").getOrCreate())
    spark.sparkContext.setLogLevel("ERROR")
    from compactor.tasks.apply import apply_plan
    from compactor.engines.spark import SparkEngine
    from compactor.tasks.plan_file import load_plan
    from compactor.project.model import Target
    engine = SparkEngine(Target(engine="spark"))
    engine.spark.range(1).count()  # JVM warm
    print("ready", flush=True)
    sys.stdin.readline()  # "go": the plan file is written only now
    apply_plan(load_plan(sys.argv[1]), target=Target(engine="spark"), engine=engine)
    print("done", flush=True)
""")


def _start(plan_file: Path) -> subprocess.Popen[str]:
    return subprocess.Popen([sys.executable, "-c", SCRIPT, str(plan_file)], stdin=subprocess.PIPE,
                            stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True, start_new_session=True)


@pytest.mark.spark
@pytest.mark.slow
def test_sigkill_spark_apply(spark, tmp_path: Path) -> None:
    rng = random.Random(7)
    t = tmp_path / "t"
    n = make_table(t, partitions=10, appends=5, rows=20)
    plan_file = tmp_path / "plan.json"
    killed = 0
    # the next subprocess starts its JVM while the current one runs and is checked: JVM start is most
    # of the cost of each kill
    warm = _start(plan_file)
    try:
        for k in range(KILLS):
            proc = warm
            assert proc.stdout.readline().strip() == "ready"
            write_plan(plan_for(t, engine="spark"), plan_file)
            proc.stdin.write("go\n")
            proc.stdin.flush()
            if k + 1 < KILLS:
                warm = _start(plan_file)
            time.sleep(rng.uniform(0.0, 2.5))
            os.killpg(proc.pid, signal.SIGKILL)  # the python driver and its JVM
            proc.wait()
            killed += proc.returncode == -signal.SIGKILL
            exactly_once(t, n)
            n = make_table(t, partitions=10, appends=1, rows=20, start=n)
    finally:
        if warm.poll() is None:  # a failed check must not leave a JVM behind
            os.killpg(warm.pid, signal.SIGKILL)
            warm.wait()
    assert killed >= KILLS // 2
    run = apply_plan(plan_for(t, engine="spark"), target=SPARK, engine=SparkEngine(SPARK))
    assert run.ok, [r.error for r in run.results if r.error]
    exactly_once(t, n)
    assert not [a for a in plan_for(t, engine="spark").tables[0].actions if a.type == "compact"]
    assert not list(t.rglob("_compactor_staging*"))
    assert not list((t / "_compactor" / "journal").glob("*.json"))
    # every file compactor left on disk was committed at some version (no orphans of killed runs);
    # committed files removed later stay until VACUUM, as with any Delta writer
    import json

    ever_added = {json.loads(line)["add"]["path"] for f in (t / "_delta_log").glob("*.json")
                  for line in f.read_text().splitlines() if line.startswith('{"add"')}
    written = {f.relative_to(t).as_posix() for f in t.rglob("*-compactor.c000.snappy.parquet")}
    assert written and written <= ever_added, written - ever_added
