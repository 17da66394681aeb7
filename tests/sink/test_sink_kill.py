"""SIGKILL at random points of a sink compaction (local engine, a separate process): after every kill a
read of the sink equals the original, and a re-run succeeds and converges."""

from __future__ import annotations

import os
import random
import shutil
import signal
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pyarrow.parquet as pq
import pytest

from compactor.formats.file_sink.log import entry_local_path
from compactor.formats.file_sink.state import read_sink_state
from compactor.project.model import Target
from compactor.tasks.apply import apply_plan
from compactor.tasks.plan_file import write_plan
from tests.sink.helpers import add_input, run_query, sink_ids, sink_plan

pytestmark = pytest.mark.spark
KILLS = 12

SCRIPT = textwrap.dedent("""
    import sys
    from compactor.tasks.apply import apply_plan
    from compactor.tasks.plan_file import load_plan
    from compactor.project.model import Target
    print("ready", flush=True)
    apply_plan(load_plan(sys.argv[1]), target=Target(engine="local"))
    print("done", flush=True)
""")


def manifest_rows(out: Path) -> list[tuple]:
    """Every row of the files the manifest lists (what spark.read.parquet(out) reads), sorted."""
    state = read_sink_state(str(out))
    rows = []
    for raw in state.files.column("path").to_pylist():
        t = pq.read_table(entry_local_path(raw, out))
        rows += list(zip(t.column("id").to_pylist(), t.column("v").to_pylist()))
    return sorted(rows)


def test_sigkill_at_random_points(spark, tmp_path: Path) -> None:
    rng = random.Random(5)
    src, out, cp = tmp_path / "in", tmp_path / "out", tmp_path / "cp"
    for b in range(9):
        add_input(src, b)
    run_query(spark, src, out, cp, compact_interval=4)
    pristine = tmp_path / "pristine"
    shutil.copytree(out, pristine)
    original = manifest_rows(out)
    assert len(original) == 9 * 50
    plan_file = tmp_path / "plan.json"
    # one uninterrupted run measures how long a compaction takes, so the kills spread over all of it
    write_plan(sink_plan(out, engine="local"), plan_file)
    proc = subprocess.Popen([sys.executable, "-c", SCRIPT, str(plan_file)], stdout=subprocess.PIPE, text=True)
    assert proc.stdout.readline().strip() == "ready"
    t0 = time.monotonic()
    assert proc.wait() == 0
    duration = time.monotonic() - t0
    assert manifest_rows(out) == original
    outcomes = []
    # kill until enough kills landed mid-run; when a run finished before its kill, the next kills aim
    # earlier (a warm process runs faster than the measured first one)
    while sum(k for k, _ in outcomes) < KILLS // 2 and len(outcomes) < 3 * KILLS:
        shutil.rmtree(out)
        shutil.copytree(pristine, out)  # same absolute paths, so the manifest stays valid
        write_plan(sink_plan(out, engine="local"), plan_file)
        proc = subprocess.Popen([sys.executable, "-c", SCRIPT, str(plan_file)], stdout=subprocess.PIPE,
                                stderr=subprocess.DEVNULL, text=True, cwd=str(tmp_path))
        assert proc.stdout.readline().strip() == "ready"
        time.sleep(rng.uniform(0.0, duration))
        os.kill(proc.pid, signal.SIGKILL)
        proc.wait()
        swapped = "compactor" in (out / "_spark_metadata" / "7.compact").read_text()
        outcomes.append((proc.returncode == -signal.SIGKILL, swapped))
        if not outcomes[-1][0]:
            duration *= 0.7
        assert manifest_rows(out) == original  # old or new manifest, never a mix
        # a re-run (lease of the killed process taken over, journal recovered) succeeds
        run = apply_plan(sink_plan(out, engine="local"), target=Target(engine="local"))
        assert run.ok, [r.error for r in run.results]
        assert manifest_rows(out) == original
        state = read_sink_state(str(out))
        # converged: one file per partition in 7.compact, plus the two files of the later batch 8
        assert state.file_count == 4 and state.extra.compact_entries == 2
        # no orphan staging dirs or unlisted compactor outputs left behind
        listed = {entry_local_path(p, out) for p in state.files.column("path").to_pylist()}
        on_disk = {p for p in out.rglob("*compactor*.parquet")}
        assert on_disk <= listed
        assert not list(out.rglob("_compactor_staging_*"))
    assert sum(k for k, _ in outcomes) >= KILLS // 2, outcomes  # most kills landed mid-run
    assert sink_ids(spark, out) == sorted(i for i, _ in original)
