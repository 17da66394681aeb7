"""A real standalone cluster: Delta round trip across two workers, and a worker SIGKILLed mid-job."""

from __future__ import annotations

import json
import time
from pathlib import Path

import pyarrow.parquet as pq
import pytest
from deltalake import DeltaTable

from tests.cluster import StandaloneCluster

pytestmark = [pytest.mark.slow, pytest.mark.spark]

DRIVER = Path(__file__).with_name("driver.py")


def _parse(stdout: str) -> tuple[str, dict]:
    app = next(line.split()[1] for line in stdout.splitlines() if line.startswith("app "))
    result = next(line[len("result "):] for line in stdout.splitlines() if line.startswith("result "))
    return app, json.loads(result)


def test_delta_round_trip_on_two_workers(cluster: StandaloneCluster, tmp_path: Path) -> None:
    t = tmp_path / "t"
    rows = 10_000
    app, res = _parse(cluster.run_driver(DRIVER, "roundtrip", cluster.master_url, str(t), "--rows", str(rows)))
    if not res["delta"]:
        pytest.skip("the Delta Lake jars could not be loaded into the cluster driver")
    assert res["executors"] == 2
    assert (res["count"], res["distinct"], res["min"], res["max"]) == (rows, rows, 0, rows - 1)
    assert res["sum"] == rows * (rows - 1) // 2 and res["sum_v"] == res["sum"] * 0.5
    assert res["parts"] == ["0", "1", "2", "3"]
    # one executor on each worker, and each of them ran tasks of this application
    live = [w.name for w in cluster.alive_workers()]
    launched = cluster.launched_executors(app)
    assert [launched[w] for w in live] == [1, 1], launched
    ran = {k.split("/")[0] for k, log in cluster.executor_logs(app).items() if "Running task" in log}
    assert ran == set(live)
    # an independent reader (delta-rs's log, pyarrow file by file, in this process) sees every row once
    live = DeltaTable(str(t)).file_uris()
    seen = sorted(i for u in live for i in pq.ParquetFile(u).read(columns=["id"]).column("id").to_pylist())
    assert seen == list(range(rows))


def _committed_tasks(out: Path) -> int:
    """Tasks whose output the (v1) FileOutputCommitter has committed into the job's _temporary folder."""
    return len(list(out.glob("_temporary/0/task_*")))


def _wait(cond, timeout: float, what: str, driver, cluster: StandaloneCluster, log_name: str) -> None:
    deadline = time.monotonic() + timeout
    while not cond():
        if driver.poll() is not None or time.monotonic() > deadline:
            log = (cluster.root / "logs" / f"{log_name}.log").read_text(errors="replace")
            raise AssertionError(f"{what} (driver exit code {driver.poll()})\n" + "\n".join(log.splitlines()[-30:]))
        time.sleep(0.1)


def test_worker_sigkilled_mid_write(cluster: StandaloneCluster, tmp_path: Path) -> None:
    """12 tasks of ~3 s on two 1-core workers; one worker's process group (worker + executor + its Python
    workers) is SIGKILLed once two tasks have committed. The job still succeeds on the other worker,
    every row is written once, and only the final files are left (no attempt files)."""
    out = tmp_path / "out"
    tasks, rows = 12, 120_000
    drv = cluster.start_driver(DRIVER, "slow_write", cluster.master_url, str(out), "--tasks", str(tasks),
                               "--task-seconds", "3", "--rows", str(rows), log_name="kill-mid-write")
    lines = []
    try:
        lines.append(drv.stdout.readline())
        lines.append(drv.stdout.readline())
        assert lines[1].split() == ["executors", "2"], lines
        _wait(lambda: _committed_tasks(out) >= 2, 240, "no task committed", drv, cluster, "kill-mid-write")
        victim = cluster.alive_workers()[0]
        cluster.kill_worker(cluster.workers.index(victim))
        stdout, _ = drv.communicate(timeout=300)
    finally:
        cluster.stop_driver(drv)
    _, res = _parse("".join(lines) + stdout)
    assert res["error"] is None, res
    assert (res["rows"], res["distinct"]) == (rows, rows)
    files = sorted(p.name for p in out.iterdir())
    assert len([f for f in files if f.startswith("part-") and f.endswith(".parquet")]) == tasks, files
    assert "_temporary" not in files and "_SUCCESS" in files
    log = (cluster.root / "logs" / "kill-mid-write.log").read_text()
    assert "Lost executor" in log or "lost executor" in log.lower()
    assert len(cluster.alive_workers()) == 1


def test_single_task_bin_write_survives_worker_kill(cluster: StandaloneCluster, tmp_path: Path) -> None:
    """compactor's bin shape: one task (coalesce(1)) writing one file. SIGKILL the worker running it:
    the task is re-run on the other worker and the output folder holds exactly one data file."""
    out = tmp_path / "out"
    drv = cluster.start_driver(DRIVER, "slow_write", cluster.master_url, str(out), "--tasks", "6",
                               "--task-seconds", "2", "--rows", "60000", "--single", log_name="kill-single")
    lines = []
    try:
        lines.append(drv.stdout.readline())
        app = lines[0].split()[1]
        lines.append(drv.stdout.readline())
        assert lines[1].split() == ["executors", "2"], lines

        def running() -> str | None:
            hits = [k for k, log in cluster.executor_logs(app).items() if "Running task 0.0 in stage" in log]
            return hits[0].split("/")[0] if hits else None

        _wait(lambda: running() is not None, 240, "the write task never started", drv, cluster, "kill-single")
        time.sleep(2)  # inside the task, after the first input partition
        victim = running()
        cluster.kill_worker(int(victim.removeprefix("worker")))
        stdout, _ = drv.communicate(timeout=300)
    finally:
        cluster.stop_driver(drv)
    _, res = _parse("".join(lines) + stdout)
    assert res["error"] is None, res
    assert (res["rows"], res["distinct"]) == (60_000, 60_000)
    data = [p.name for p in out.iterdir() if p.name.startswith("part-")]
    assert len(data) == 1 and data[0].endswith(".parquet"), sorted(p.name for p in out.iterdir())
    assert not (out / "_temporary").exists()
    # the retried attempt ran on the surviving worker
    retried = [k for k, log in cluster.executor_logs(app).items()
               if "Running task 0.1 in stage" in log]
    assert retried and not retried[0].startswith(victim + "/"), retried
