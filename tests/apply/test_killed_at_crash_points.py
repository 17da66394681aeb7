"""`compactor apply` SIGKILLed (a real kill, its own process) at each of a Delta rewrite's crash points
(runtime/faults.py): the log never references a missing file, every row is there exactly once, and the
next apply, in a new process, recovers the killed run's leftovers and compacts the table. The fuzzer
(tests/fuzz) simulates these kills in-process over random histories; this is the kill itself."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
from pathlib import Path

import pytest
from deltalake import DeltaTable

from tests.apply.helpers import exactly_once, make_table, on_disk_unreferenced, one_table_project

POINTS = ("delta.journal_written", "delta.outputs_written", "delta.before_commit", "delta.after_commit")


def _compactor(*args: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "compactor", *args], capture_output=True, text=True,
                          env={**os.environ, "COMPACTOR_WATCH_WINDOW": "0", **(env or {})}, timeout=300)


@pytest.mark.parametrize("point", POINTS)
def test_apply_killed_at_a_crash_point_loses_nothing_and_the_next_apply_recovers(tmp_path: Path, point: str) -> None:
    t = tmp_path / "t"
    n = make_table(t, partitions=2, appends=4)
    proj = one_table_project(tmp_path / "proj", t)
    plan = tmp_path / "plan.json"
    assert _compactor("plan", "--project-dir", str(proj), "--out", str(plan)).returncode == 0
    version = DeltaTable(str(t)).version()

    killed = _compactor("apply", str(plan), "--project-dir", str(proj), env={"COMPACTOR_CRASH_AT": point})
    assert killed.returncode == -signal.SIGKILL, killed.stdout + killed.stderr
    dt = DeltaTable(str(t))
    assert all(Path(u).exists() for u in dt.file_uris())  # the log references no missing file
    assert (dt.version() > version) == (point == "delta.after_commit")
    exactly_once(t, n)

    again = tmp_path / "again.json"
    assert _compactor("plan", "--project-dir", str(proj), "--out", str(again)).returncode == 0
    run = _compactor("apply", str(again), "--project-dir", str(proj))
    assert run.returncode == 0, run.stdout + run.stderr
    dt = DeltaTable(str(t))
    assert all(Path(u).exists() for u in dt.file_uris())
    exactly_once(t, n)
    assert len(dt.file_uris()) == 2  # one file per partition
    assert not list(t.rglob("_compactor_staging_*"))
    # outputs the killed run never committed were deleted by the recovery; committed ones are in the log
    assert on_disk_unreferenced(t) == set(), on_disk_unreferenced(t)
