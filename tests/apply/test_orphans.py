"""Files written by an interrupted rewrite but never committed are cleaned up, and nothing else is."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import time
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
from deltalake import DeltaTable

from compactor.formats import get_format
from compactor.models.table import TableLocation
from compactor.project.model import Target
from compactor.runtime import liveness
from compactor.runtime.journal import JournalEntry, journal_dir
from compactor.tasks.apply import apply_plan
from tests.apply.helpers import exactly_once, make_table, on_disk_unreferenced, plan_for


def _dead_pid() -> int:
    return int(subprocess.run([sys.executable, "-c", "import os; print(os.getpid())"], capture_output=True,
                              text=True, check=True).stdout)


def recover_orphans(table: str, grace_s: float) -> list[str]:
    return get_format("delta").recover(TableLocation(table), grace_s=grace_s)


def _journal(t: Path, folders: list[str], started: float, heartbeat: float, pid: int,
             outputs: list[str] | None = None) -> Path:
    jdir = journal_dir(str(t))
    jdir.mkdir(parents=True, exist_ok=True)
    entry = JournalEntry("run-x", "run-x:t:0", str(t), DeltaTable(str(t)).version(), outputs=outputs or [],
                         folders=folders, pid=pid, started_at=started, heartbeat_at=heartbeat,
                         identity=liveness.identity_of(pid))
    path = jdir / "run-x-t-0.json"
    path.write_text(json.dumps(entry.__dict__))
    return path


def _orphan_like_delta_rs(t: Path, folder: str, name: str) -> Path:
    """A file delta-rs wrote (parquet-rs footer) that no commit references: exactly what a compaction
    killed before its commit leaves behind."""
    live = pa.table(DeltaTable(str(t)).get_add_actions(flatten=True)).column("path").to_pylist()
    src = t / next(p for p in live if p.startswith(folder))
    dst = t / folder / name
    shutil.copyfile(src, dst)
    return dst


def test_orphans_of_a_dead_run_are_deleted_and_nothing_else(tmp_path: Path) -> None:
    t = tmp_path / "t"
    n = make_table(t, partitions=2, appends=3)
    started = time.time()
    mine = _orphan_like_delta_rs(t, "date=2024-01-01", "part-00000-aaaa-c000.zstd.parquet")
    other_folder = _orphan_like_delta_rs(t, "date=2024-01-02", "part-00000-bbbb-c000.zstd.parquet")
    foreign = t / "date=2024-01-01" / "part-00000-cccc-c000.snappy.parquet"
    pq.write_table(pa.table({"id": pa.array([1], pa.int64())}), foreign)  # not written by delta-rs
    old = _orphan_like_delta_rs(t, "date=2024-01-01", "part-00000-dddd-c000.zstd.parquet")
    os.utime(old, (started - 600, started - 600))  # before the run started: not provably ours
    jfile = _journal(t, ["date=2024-01-01"], started - 1, time.time(), _dead_pid())
    live_before = set(pa.table(DeltaTable(str(t)).get_add_actions(flatten=True)).column("path").to_pylist())

    assert recover_orphans(str(t), grace_s=3600) == []  # too young: an appender might still commit it
    assert mine.exists() and jfile.exists()
    deleted = recover_orphans(str(t), grace_s=0)
    assert deleted == ["date=2024-01-01/" + mine.name]
    assert not mine.exists() and other_folder.exists() and foreign.exists() and old.exists()
    assert not jfile.exists()
    assert set(pa.table(DeltaTable(str(t)).get_add_actions(flatten=True)).column("path").to_pylist()) == live_before
    exactly_once(t, n)


def test_journal_of_a_running_process_is_left_alone(tmp_path: Path) -> None:
    t = tmp_path / "t"
    make_table(t, partitions=1, appends=2)
    proc = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(30)"])
    try:
        mine = _orphan_like_delta_rs(t, "date=2024-01-01", "part-00000-eeee-c000.zstd.parquet")
        _journal(t, ["date=2024-01-01"], time.time() - 5, time.time(), proc.pid)
        assert recover_orphans(str(t), grace_s=0) == []
        assert mine.exists()
    finally:
        proc.kill()
        proc.wait()


def test_named_outputs_of_a_dead_run_are_deleted_at_once_unless_committed(tmp_path: Path) -> None:
    """compactor names every output before writing it: a dead run's outputs that no commit references
    are deleted without waiting for the grace period, and a committed one is kept."""
    t = tmp_path / "t"
    n = make_table(t, partitions=1, appends=3)
    orphan = _orphan_like_delta_rs(t, "date=2024-01-01", "part-orphan-compactor.c000.snappy.parquet")
    live = pa.table(DeltaTable(str(t)).get_add_actions(flatten=True)).column("path").to_pylist()
    jfile = _journal(t, [], time.time() - 1, time.time(), _dead_pid(),
                     outputs=["date=2024-01-01/" + orphan.name, live[0]])
    assert recover_orphans(str(t), grace_s=3600) == ["date=2024-01-01/" + orphan.name]
    assert not orphan.exists() and (t / live[0]).exists() and not jfile.exists()
    exactly_once(t, n)


def test_failed_rewrite_leaves_nothing_and_the_next_run_succeeds(tmp_path: Path) -> None:
    """An engine that writes its outputs and fails before the commit: what it wrote is deleted at once
    (the journal named it), nothing is committed, and the next run compacts normally."""
    from compactor.engines.local import LocalEngine

    t = tmp_path / "t"
    n = make_table(t, partitions=1, appends=4)
    written: list[str] = []

    class _CrashingEngine(LocalEngine):
        def rewrite(self, jobs, schema, on_done=None):
            files = super().rewrite(jobs, schema, on_done)
            written.extend(f.location for f in files)
            raise OSError("disk full")

    version = DeltaTable(str(t)).version()
    run = apply_plan(plan_for(t), target=Target(), engine=_CrashingEngine(), orphan_grace_s=3600)
    assert [r.status for r in run.results] == ["error"] and "disk full" in run.results[0].error
    assert written and not any(Path(w).exists() for w in written)
    assert DeltaTable(str(t)).version() == version
    run = apply_plan(plan_for(t), target=Target(), orphan_grace_s=0)
    assert run.ok, [r.error for r in run.results]
    assert not list(journal_dir(str(t)).glob("*.json"))
    assert on_disk_unreferenced(t) == set()
    exactly_once(t, n)


def test_a_damaged_journal_entry_deletes_nothing(tmp_path: Path) -> None:
    """An entry of a dead run that names an empty staging path (its prefix is the whole table), the log, a
    path out of the table or compactor's own state is kept and deletes nothing: recovery only ever deletes
    files and staging folders compactor itself names."""
    t = tmp_path / "t"
    n = make_table(t, partitions=2, appends=3)
    outside = tmp_path / "outside.parquet"
    outside.write_bytes(b"not the table's")
    log0 = "_delta_log/00000000000000000000.json"
    for outputs, staging in (([], [""]), ([log0], []), (["../outside.parquet"], []), (["_compactor/x"], []),
                             ([], ["_delta_log"]), ([], ["../_compactor_staging_x"])):
        path = _journal(t, [], time.time() - 7200, time.time() - 7200, _dead_pid(), outputs=outputs)
        doc = json.loads(path.read_text())
        doc["staging"] = staging
        path.write_text(json.dumps(doc))
        assert recover_orphans(str(t), grace_s=0) == []
        assert path.exists(), (outputs, staging)  # kept, for a person to look at
        path.unlink()
    assert (t / log0).exists() and outside.exists()
    exactly_once(t, n)
    assert not on_disk_unreferenced(t)
