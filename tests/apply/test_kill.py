"""SIGKILL at random points of a local-engine apply: the table stays readable with every row exactly
once, and re-running converges."""

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

from compactor.project.model import Target
from compactor.runtime.journal import journal_dir
from compactor.tasks.apply import apply_plan
from compactor.tasks.plan_file import write_plan
from tests.apply.helpers import exactly_once, make_table, on_disk_unreferenced, plan_for

KILLS = 12

SCRIPT = textwrap.dedent("""
    import sys
    from compactor.tasks.apply import apply_plan
    from compactor.tasks.plan_file import load_plan
    from compactor.project.model import Target
    print("ready", flush=True)
    apply_plan(load_plan(sys.argv[1]), target=Target())
    print("done", flush=True)
""")


@pytest.mark.slow
def test_sigkill_at_random_points_never_loses_or_duplicates(tmp_path: Path) -> None:
    rng = random.Random(20261121)
    t = tmp_path / "t"
    n = make_table(t, partitions=12, appends=6, rows=20)
    plan_file = tmp_path / "plan.json"
    killed_mid_run = 0
    for _i in range(KILLS):
        write_plan(plan_for(t), plan_file)
        proc = subprocess.Popen([sys.executable, "-c", SCRIPT, str(plan_file)], stdout=subprocess.PIPE,
                                stderr=subprocess.DEVNULL, text=True)
        assert proc.stdout.readline().strip() == "ready"
        time.sleep(rng.uniform(0.0, 0.25))
        os.kill(proc.pid, signal.SIGKILL)
        proc.wait()
        killed_mid_run += proc.returncode == -signal.SIGKILL
        exactly_once(t, n)  # readable, every row once, after every kill
        # more small files keep arriving, so later kills hit compactions too
        n = make_table(t, partitions=12, appends=1, rows=20, start=n)
    assert killed_mid_run >= KILLS // 2
    # re-running converges: a fresh plan applies cleanly and leaves nothing to compact
    # (grace 0: no appender is running, so every file a killed run wrote but never committed goes now)
    run = apply_plan(plan_for(t), target=Target(), orphan_grace_s=0)
    assert run.ok, [r.error for r in run.results if r.error]
    exactly_once(t, n)
    assert on_disk_unreferenced(t) == set()
    assert not list(journal_dir(str(t)).glob("*.json"))
    assert not [a for a in plan_for(t).tables[0].actions if a.type == "compact"]
    run2 = apply_plan(plan_for(t), target=Target())
    assert run2.ok
