"""Where the time of today's sequential spark engine goes, per action, on the spark_scale table
(200 partitions x 10 files = 200 compact actions of one bin each): ``apply_plan`` in-process with
``SparkEngine`` on local[2], with timers wrapped around the runner's and the engine's steps.

    python bench/spark_action_profile.py
"""

from __future__ import annotations

import functools
import shutil
import subprocess
import sys
import tempfile
import time
from collections import defaultdict
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
sys.path.insert(0, str(Path(__file__).resolve().parent))

TIMES: dict[str, float] = defaultdict(float)
CALLS: dict[str, int] = defaultdict(int)


def timed(owner: object, attr: str, label: str | None = None, static: bool = False) -> None:
    fn = getattr(owner, attr)
    name = label or attr

    @functools.wraps(fn)
    def wrapper(*a, **kw):
        t0 = time.perf_counter()
        try:
            return fn(*a, **kw)
        finally:
            TIMES[name] += time.perf_counter() - t0
            CALLS[name] += 1

    setattr(owner, attr, staticmethod(wrapper) if static else wrapper)


def main() -> None:
    import spark_scale

    from compactor.apply import runner
    from compactor.engines import delta_commit, delta_guard, spark as spark_mod
    from compactor.engines.lease import TableLease
    from compactor.engines.spark import SparkEngine
    from compactor.planning.io import load_plan
    from compactor.project.model import SparkSettings, Target

    timed(runner, "_read_state", "runner: read table state")
    timed(runner, "_run_action", "runner: whole action")
    timed(TableLease, "check", "runner: lease check")
    timed(runner, "_recover", "runner: orphan recovery")
    timed(SparkEngine, "_rewrite", "engine: whole rewrite")
    timed(SparkEngine, "_write_bin", "engine: Spark job (read bin, coalesce(1), write)")
    timed(SparkEngine, "_move_single_output", "engine: move output into place", static=True)
    timed(spark_mod, "check_written_schema", "engine: schema check")
    timed(spark_mod, "footer_stats", "engine: footer stats")
    timed(delta_commit, "commit_rewrite", "engine: delta-rs commit (incl. live re-check)")
    timed(delta_commit, "clean_journals", "engine: clean journals")
    timed(delta_commit, "write_journal", "engine: write journal")
    timed(delta_guard, "find_own_commit", "engine: find own commit")
    timed(delta_guard, "find_overlapping_removes", "engine: overlap scan")

    base = Path(tempfile.mkdtemp(prefix="compactor-action-profile-"))
    try:
        spark_scale.build(base / "t")
        proj = spark_scale.make_project(base / "p", base / "t", "local[2]", spark_scale.BASE_CONF)
        plan_file = proj / "target" / "plan.json"
        subprocess.run([sys.executable, "-m", "compactor", "plan", "--project-dir", str(proj), "--out", str(plan_file)],
                       check=True, capture_output=True)
        target = Target(engine="spark", spark=SparkSettings(master="local[2]", conf=spark_scale.BASE_CONF))
        engine = SparkEngine(target)
        t0 = time.perf_counter()
        engine.spark.range(1).count()
        session = time.perf_counter() - t0
        t0 = time.perf_counter()
        run = runner.apply_plan(load_plan(plan_file), target=target, engine=engine)
        total = time.perf_counter() - t0
        assert run.ok, [r.error for r in run.results if r.error][:3]
        engine.close()
        spark_scale.check(base / "t")
    finally:
        shutil.rmtree(base, ignore_errors=True)
    n = CALLS["runner: whole action"]
    print(f"session start {session:.1f}s; apply_plan {total:.1f}s for {n} actions ({total / n:.3f}s each)\n")
    print("| step | calls | total (s) | per action (s) | share of apply |")
    print("|---|---:|---:|---:|---:|")
    for name, t in TIMES.items():
        print(f"| {name} | {CALLS[name]} | {t:.1f} | {t / n:.3f} | {100 * t / total:.0f}% |")


if __name__ == "__main__":
    main()
