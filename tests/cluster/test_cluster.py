"""compactor's spark engine on a real standalone cluster (tests/cluster.py): apply_plan in a driver
subprocess whose executors run on two worker JVMs, tables checked in this process through delta-rs.

One session-scoped cluster and one driver application serve every test here (tests/cluster/conftest.py).
"""

from __future__ import annotations

import re
import time
from collections import Counter
from pathlib import Path

import pytest

from compactor.formats.delta.read.state import read_delta_state
from compactor.models.table import TableLocation
from compactor.tasks.plan_file import write_plan
from tests.apply.helpers import exactly_once, make_table, on_disk_unreferenced, plan_for
from tests.cluster import DriverClient, StandaloneCluster

pytestmark = [pytest.mark.slow, pytest.mark.spark]


def _live(t: Path) -> set[str]:
    return set(read_delta_state(TableLocation(str(t))).paths)


def _bin_of_four(t: Path) -> int:
    """A target size of 4.5 of the table's (equal, freshly appended) files: bins of 4 files, and outputs
    of ~4 files are above the small-file threshold (half the target), so a compacted partition is done."""
    return int(max(f.stat().st_size for f in t.rglob("*.parquet")) * 4.5)


def _plan(t: Path, out: Path, target: int):
    """A spark-engine plan (method rewrite) for table ``t``, written to ``out``."""
    plan = plan_for(t, engine="spark", target_size=target)
    write_plan(plan, out)
    return plan


def _leftovers(t: Path) -> dict[str, list[str]]:
    """What an apply must not leave behind: journals, staging folders, files no commit added."""
    return {"journals": sorted(str(p.relative_to(t)) for p in (t / "_compactor").rglob("*")
                               if p.is_file() and "journal" in str(p)),
            "staging": sorted(str(p.relative_to(t)) for p in t.rglob("_compactor_staging_*")),
            "unreferenced": sorted(on_disk_unreferenced(t))}


def _executor_tasks(cluster: StandaloneCluster, app: str) -> Counter:
    """Tasks each worker's executors of ``app`` started (their stderr's "Running task" lines)."""
    return Counter({k.split("/")[0]: log.count("Running task") for k, log in cluster.executor_logs(app).items()})


def test_apply_on_two_workers(cluster: StandaloneCluster, driver: DriverClient, tmp_path: Path) -> None:
    """Every planned action commits; the log swaps exactly the planned inputs for the expected outputs;
    every id is live exactly once; the bins ran on executors of both workers."""
    t = tmp_path / "t"
    n = make_table(t, partitions=4, appends=8, rows=500)
    plan = _plan(t, tmp_path / "plan.json", _bin_of_four(t))
    actions = plan.tables[0].actions
    assert len(actions) == 4 and all(len(a.bins) == 2 for a in actions), [len(a.bins) for a in actions]
    before = _live(t)
    tasks_before = _executor_tasks(cluster, driver.app_id)
    res = driver.request({"op": "apply", "plan": str(tmp_path / "plan.json")})
    assert res.get("ok"), res
    assert [r["status"] for r in res["results"]] == ["success"] * 4
    # one commit group (8 bins < commit_every_bins' default): the four actions share one commit
    assert len({r["version_after"] for r in res["results"]}) == 1, res["results"]
    after = _live(t)
    planned = {p for a in actions for p in a.input_paths}
    assert planned <= before and not (planned & after), "a planned input is still live"
    assert before - planned <= after, "a file outside the plan was removed"
    added = after - before
    assert len(added) == sum(a.expected_output_files for a in actions) == 8
    assert all(p.endswith("-compactor.c000.snappy.parquet") for p in added)
    for r, a in zip(res["results"], actions):
        assert (r["files_removed"], r["files_added"]) == (a.input_files, a.expected_output_files)
    exactly_once(t, n)
    assert _leftovers(t) == {"journals": [], "staging": [], "unreferenced": []}
    ran = _executor_tasks(cluster, driver.app_id) - tasks_before
    assert len([w for w, k in ran.items() if k > 0]) == 2, f"tasks per worker: {dict(ran)}"


def _running_worker(cluster: StandaloneCluster, app: str) -> int | None:
    """The index of a live worker whose executor of ``app`` has a task running right now."""
    for k, log in cluster.executor_logs(app).items():
        w = int(k.split("/")[0].removeprefix("worker"))
        if cluster.workers[w].alive() and log.count("Running task") > log.count("Finished task"):
            return w
    return None


def test_worker_killed_mid_apply(cluster: StandaloneCluster, driver: DriverClient, tmp_path: Path) -> None:
    """A worker's process group (worker JVM + executor + Python workers) is SIGKILLed while bins are being
    written, with commit groups of two actions. Spark re-runs the lost tasks on the other executor and the
    apply succeeds, or compactor fails that group cleanly (groups committed before stay committed); either way every id stays live exactly once, nothing is left behind, and a new
    plan + apply converges (no compaction left)."""
    t = tmp_path / "t"
    n = make_table(t, partitions=6, appends=8, rows=40_000)  # bins of 160k rows: tasks of ~1 s or more
    target = _bin_of_four(t)
    plan = _plan(t, tmp_path / "plan.json", target)
    actions = plan.tables[0].actions
    before = _live(t)
    # commit groups of 2 actions (4 bins): 3 groups, so groups before the kill commit whatever happens after
    driver.send({"op": "apply", "plan": str(tmp_path / "plan.json"), "target": {"commit_every_bins": 4}})
    # bins are being written once a staging folder holds Spark's _temporary; then pick a busy worker
    deadline, victim = time.monotonic() + 120, None
    while time.monotonic() < deadline and victim is None:
        if any(t.glob("*/_compactor_staging_*/_temporary")):
            victim = _running_worker(cluster, driver.app_id)
        time.sleep(0.05)
    assert victim is not None, f"no bin was seen being written\n{driver.log()[-3000:]}"
    cluster.kill_worker(victim)
    res = driver.result(timeout=300)
    assert "raised" not in res, res
    statuses = [r["status"] for r in res["results"]]
    # a task lost with its executor is re-run as attempt 1+ on the other one (the driver logs that at INFO)
    retried = sum(len(re.findall(r"Running task \d+\.[1-9]\d* in stage", log))
                  for log in cluster.executor_logs(driver.app_id).values())
    versions = [r["version_after"] for r in res["results"]]
    print(f"kill outcome: {statuses}; commits {versions}; task attempts retried {retried}; apply {res['seconds']} s")
    assert set(statuses) <= {"success", "error"}, res
    assert "Lost executor" in driver.log(), "the driver did not see the executor die"
    # commit groups of 2 actions: both members of a group end alike, a committed group in one commit
    for i in range(0, len(actions), 2):
        a, b = res["results"][i:i + 2]
        assert a["status"] == b["status"], res["results"]
        assert a["status"] != "success" or a["version_after"] == b["version_after"], res["results"]
    # the log: succeeded actions swapped their inputs, failed ones left theirs live
    after = _live(t)
    for r, a in zip(res["results"], actions):
        live_inputs = set(a.input_paths) & after
        assert live_inputs == (set() if r["status"] == "success" else set(a.input_paths)), r
    assert len(after - before) == sum(a.expected_output_files for r, a in zip(res["results"], actions)
                                      if r["status"] == "success")
    exactly_once(t, n)
    assert _leftovers(t) == {"journals": [], "staging": [], "unreferenced": []}

    # converge: replace the worker, plan again, apply, and nothing is left to compact
    cluster.ensure_workers(2)
    assert driver.request({"op": "executors", "wait_for": 2}, timeout=180)["executors"] == 2
    again = _plan(t, tmp_path / "plan2.json", target)
    failed = statuses.count("error")
    assert len(again.tables[0].actions) == failed, (statuses, [a.partition for a in again.tables[0].actions])
    if failed:
        res2 = driver.request({"op": "apply", "plan": str(tmp_path / "plan2.json")})
        assert res2.get("ok"), res2
    final = _plan(t, tmp_path / "plan3.json", target)
    assert not final.tables[0].actions, [a.partition for a in final.tables[0].actions]
    exactly_once(t, n)
    assert _leftovers(t) == {"journals": [], "staging": [], "unreferenced": []}
