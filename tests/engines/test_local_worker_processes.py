"""The local engine's worker processes (engines/worker_processes.py): a call of many local files rewrites
its bins in processes forked for the call. Rows stay exact; a worker that dies fails the call with nothing
committed; a compactor killed mid-rewrite leaves no worker behind, and the next apply recovers."""

from __future__ import annotations

import contextlib
import json
import os
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from deltalake import DeltaTable, write_deltalake
from deltalake.transaction import AddAction

from compactor.engines import local, worker_processes
from compactor.project.model import Target
from compactor.tasks.apply import apply_plan
from tests.apply.helpers import exactly_once, plan_for
from tests.cli.test_cli import project

pytestmark = pytest.mark.skipif(not worker_processes.available(), reason="worker processes need Linux with fork")

PARTITIONS, FILES, ROWS = 4, 240, 25


def many_files(path: Path) -> int:
    """FILES small files in PARTITIONS partitions, committed in one transaction; ids 0.. unique."""
    write_deltalake(str(path), pa.table({"date": pa.array([], pa.string()), "id": pa.array([], pa.int64())}),
                    partition_by=["date"])
    actions = []
    for i in range(FILES):
        part = f"2024-01-0{i % PARTITIONS + 1}"
        rel = f"date={part}/f-{i:04d}.parquet"
        (path / f"date={part}").mkdir(exist_ok=True)
        pq.write_table(pa.table({"id": pa.array(range(i * ROWS, (i + 1) * ROWS), pa.int64())}), path / rel)
        actions.append(AddAction(rel, (path / rel).stat().st_size, {"date": part}, int(time.time() * 1000), True,
                                 json.dumps({"numRecords": ROWS})))
    dt = DeltaTable(str(path))
    dt.create_write_transaction(actions, mode="append", schema=dt.schema(), partition_by=["date"])
    return FILES * ROWS


def test_a_call_of_many_files_runs_in_worker_processes_and_rows_stay_exact(tmp_path: Path, monkeypatch) -> None:
    t = tmp_path / "t"
    n = many_files(t)
    forked: list[int] = []
    real = worker_processes.run_bins

    def counting(fn, jobs, width, on_done=None):  # the real pool; records that it ran and how wide
        forked.append(min(width, len(jobs)))
        return real(fn, jobs, width, on_done)

    monkeypatch.setattr(worker_processes, "run_bins", counting)
    run = apply_plan(plan_for(t), target=Target(threads=2))
    assert run.ok, [r.error for r in run.results]
    assert forked == [2], forked
    exactly_once(t, n)
    assert len(DeltaTable(str(t)).file_uris()) == PARTITIONS


def test_below_the_threshold_bins_run_in_threads(tmp_path: Path, monkeypatch) -> None:
    t = tmp_path / "t"
    n = many_files(t)
    monkeypatch.setattr(local, "PROCESS_MIN_FILES", FILES + 1)
    monkeypatch.setattr(worker_processes, "run_bins", lambda *a, **k: pytest.fail("no worker process expected"))
    run = apply_plan(plan_for(t), target=Target(threads=2))
    assert run.ok, [r.error for r in run.results]
    exactly_once(t, n)


def _proj(tmp_path: Path, t: Path) -> Path:
    return project(tmp_path / "proj", f"version: 1\ntables:\n  - name: t\n    path: {t}\n    compaction:\n"
                                      "      target_file_size: 1MiB\n      triggers: {min_input_files: 2}\n",
                   "default:\n  target: dev\n  outputs:\n    dev: {engine: local, max_concurrent_rewrites: 2}\n")


def _cli(*args: str, env: dict[str, str] | None = None) -> subprocess.Popen:
    return subprocess.Popen([sys.executable, "-m", "compactor", *args], stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True,
                            env={**os.environ, "COMPACTOR_WATCH_WINDOW": "0", **(env or {})})


def _children(pid: int) -> list[int]:
    out = []
    for task in Path(f"/proc/{pid}/task").iterdir():
        out += [int(c) for c in (task / "children").read_text().split()]
    return out


def _state(pid: int) -> str | None:
    """The process's state letter (R, S, T stopped, Z zombie), None when it is gone."""
    try:
        return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except (FileNotFoundError, ProcessLookupError, IndexError):
        return None


def _stopped_workers(pid: int, want: int, timeout: float = 60) -> list[int]:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        workers = [c for c in _children(pid) if _state(c) == "T"]
        if len(workers) >= want:
            return workers
        time.sleep(0.05)
    raise AssertionError(f"no {want} stopped worker(s) of {pid} within {timeout}s: {_children(pid)}")


def _plan(tmp_path: Path, proj: Path) -> Path:
    plan = tmp_path / "plan.json"
    p = _cli("plan", "--project-dir", str(proj), "--out", str(plan))
    out, err = p.communicate(timeout=120)
    assert p.returncode == 0, out + err
    return plan


@dataclass
class StoppedApply:
    """`compactor apply` of a many-file table, its worker processes stopped before their first bin."""

    table: Path
    rows: int
    project: Path
    version: int
    proc: subprocess.Popen
    workers: list[int]


@contextlib.contextmanager
def _apply_with_workers_stopped(tmp_path: Path) -> Iterator[StoppedApply]:
    t = tmp_path / "t"
    n = many_files(t)
    proj = _proj(tmp_path, t)
    version = DeltaTable(str(t)).version()
    apply = _cli("apply", str(_plan(tmp_path, proj)), "--project-dir", str(proj),
                 env={"COMPACTOR_STOP_AT": "engine.worker_bin"})
    try:
        yield StoppedApply(t, n, proj, version, apply, _stopped_workers(apply.pid, 2))
    finally:
        apply.kill()


def test_a_killed_compactor_leaves_no_worker_and_the_next_apply_recovers(tmp_path: Path) -> None:
    with _apply_with_workers_stopped(tmp_path) as run:
        run.proc.kill()  # SIGKILL: no cleanup of its own; the kernel kills the workers (PR_SET_PDEATHSIG)
        run.proc.communicate(timeout=30)
        deadline = time.monotonic() + 10
        while any(_state(w) not in (None, "Z") for w in run.workers) and time.monotonic() < deadline:
            time.sleep(0.05)
        assert [_state(w) for w in run.workers if _state(w) not in (None, "Z")] == []
    assert DeltaTable(str(run.table)).version() == run.version
    exactly_once(run.table, run.rows)
    again = _cli("apply", str(_plan(tmp_path, run.project)), "--project-dir", str(run.project))
    out, err = again.communicate(timeout=120)
    assert again.returncode == 0, out + err
    exactly_once(run.table, run.rows)
    dt = DeltaTable(str(run.table))
    assert len(dt.file_uris()) == PARTITIONS and all(Path(u).exists() for u in dt.file_uris())


def test_a_worker_killed_mid_bin_fails_the_apply_and_commits_nothing(tmp_path: Path) -> None:
    with _apply_with_workers_stopped(tmp_path) as run:
        os.kill(run.workers[0], signal.SIGKILL)
        for w in run.workers[1:]:
            os.kill(w, signal.SIGCONT)
        out, err = run.proc.communicate(timeout=120)
    assert run.proc.returncode != 0, out + err
    assert "worker process ended without finishing its bin" in out + err and "Traceback" not in out + err
    assert DeltaTable(str(run.table)).version() == run.version
    exactly_once(run.table, run.rows)
