"""What Spark does when one of two standalone workers is SIGKILLed during a parquet write.

Uses the test harness (tests/cluster.py): a master and two 1-core workers on 127.0.0.1. Two job shapes,
each run without and with a kill, alternating, ``--repeat`` times:

- multi: 12 tasks of ~3 s each (``tasks`` output files); the worker is killed once 2 tasks committed.
- single: compactor's bin shape, coalesce(1) over 6 inputs of ~2 s each = one ~12 s task writing one
  file; the worker running it is killed 5 s into the task.

Reports the write job's time (from the driver, session start excluded), the time from the kill to the end
of the write job, what the output folder held just before and right after the kill (attempt files in
``_temporary``) and at the end, and the driver's log lines about lost executors and tasks.

    python bench/spark_worker_kill.py [--repeat 2]
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from tests.cluster import StandaloneCluster, standalone_cluster  # noqa: E402

DRIVER = Path(__file__).resolve().parents[1] / "tests" / "cluster" / "driver.py"
SHAPES = {"multi": ["--tasks", "12", "--task-seconds", "3", "--rows", "120000"],
          "single": ["--tasks", "6", "--task-seconds", "2", "--rows", "60000", "--single"]}


def listing(out: Path) -> list[str]:
    return sorted(str(p.relative_to(out)) for p in out.rglob("*") if p.is_file() and not p.name.endswith(".crc"))


def run(c: StandaloneCluster, base: Path, shape: str, kill: bool, n: int) -> dict:
    c.ensure_workers(2)
    out = base / f"{shape}-{'kill' if kill else 'clean'}-{n}"
    name = out.name
    drv = c.start_driver(DRIVER, "slow_write", c.master_url, str(out), *SHAPES[shape], "--log-level", "WARN",
                         log_name=name)
    rec: dict = {"shape": shape, "kill": kill}
    try:
        app = drv.stdout.readline().split()[1]
        assert drv.stdout.readline().split() == ["executors", "2"]
        if kill:
            deadline = time.monotonic() + 300
            victim = None
            while victim is None and time.monotonic() < deadline and drv.poll() is None:
                if shape == "multi" and len(list(out.glob("_temporary/0/task_*"))) >= 2:
                    victim = c.workers.index(c.alive_workers()[0])
                elif shape == "single":
                    hits = [k for k, log in c.executor_logs(app).items() if "Running task 0.0 in stage" in log]
                    if hits:
                        time.sleep(5)  # mid-task: the first input partitions' rows are being written
                        victim = int(hits[0].split("/")[0].removeprefix("worker"))
                time.sleep(0.1)
            assert victim is not None, "never reached the kill point"
            rec["before_kill"] = listing(out)
            t_kill = time.time()
            c.kill_worker(victim)
            time.sleep(0.5)
            rec["after_kill"] = listing(out)
        stdout, _ = drv.communicate(timeout=600)
    finally:
        c.stop_driver(drv)
    res = json.loads(next(line[7:] for line in stdout.splitlines() if line.startswith("result ")))
    rec.update(res)
    if kill:
        rec["kill_to_end_s"] = round(res["write_end_epoch"] - t_kill, 1)
    rec["at_end"] = listing(out)
    log = (c.root / "logs" / f"{name}.log").read_text(errors="replace")
    rec["driver_warnings"] = sorted({line.split(": ", 1)[1][:160] for line in log.splitlines()
                                     if (" WARN " in line or " ERROR " in line)
                                     and ("Lost" in line or "lost" in line or "Removing executor" in line)})
    return rec


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--repeat", type=int, default=2)
    args = ap.parse_args()
    base = Path(tempfile.mkdtemp(prefix="compactor-worker-kill-"))
    print(f"work dir (kept, with every log): {base}", file=sys.stderr)
    records = []
    with standalone_cluster(base / "cluster") as c:
        for i in range(args.repeat):
            for shape in ("multi", "single"):
                for kill in ((False, True) if i % 2 == 0 else (True, False)):
                    r = run(c, base, shape, kill, i)
                    records.append(r)
                    print(json.dumps(r), file=sys.stderr, flush=True)
    print("| shape | kill | job s (median) | kill -> end s | rows ok | data files at end |")
    print("|---|---|---:|---:|---|---:|")
    for shape in SHAPES:
        for kill in (False, True):
            rs = [r for r in records if r["shape"] == shape and r["kill"] == kill]
            ok = all(r["error"] is None and r["rows"] == r["distinct"] for r in rs)
            files = {len([f for f in r["at_end"] if f.startswith("part-")]) for r in rs}
            k2e = f"{statistics.median(r['kill_to_end_s'] for r in rs):.1f}" if kill else "-"
            print(f"| {shape} | {kill} | {statistics.median(r['seconds'] for r in rs):.1f} | {k2e} | {ok} | "
                  f"{sorted(files)} |")


if __name__ == "__main__":
    main()
