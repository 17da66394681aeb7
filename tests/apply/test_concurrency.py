"""The delta-rs 1.6 duplicate-compaction hazard, and compactor's guards against it."""

from __future__ import annotations

import subprocess
import sys
import textwrap
from pathlib import Path

from deltalake import DeltaTable

from compactor.engines.local import LocalEngine
from compactor.formats.delta.apply import commit as commit_mod
from compactor.formats.delta.apply import guard as delta_guard
from compactor.formats.delta.apply.commit import find_commit
from compactor.formats.delta.read.state import read_delta_state
from compactor.models.table import TableLocation
from compactor.project.model import Target
from compactor.tasks.apply import apply_plan
from tests.apply.helpers import exactly_once, ids, make_table, on_disk_unreferenced, plan_for


def test_delta_rs_duplicates_rows_when_two_compactions_race(tmp_path: Path) -> None:
    """Documents the hazard (delta-compaction.md): both commits land and every row appears twice."""
    t = tmp_path / "t"
    n = make_table(t, partitions=1)
    a, b = DeltaTable(str(t)), DeltaTable(str(t))  # two handles loaded at the same version
    a.optimize.compact()
    b.optimize.compact()
    c = ids(t)
    assert sum(c.values()) == 2 * n and set(c.values()) == {2}


class _RacedEngine(LocalEngine):
    """The local engine, with another tool's compaction committing while compactor writes its files."""

    def rewrite(self, jobs, schema, on_done=None):
        out = super().rewrite(jobs, schema, on_done)
        DeltaTable(str(Path(jobs[0].output).parents[1])).optimize.compact()  # the other tool commits first
        return out


def test_a_compaction_committed_during_the_rewrite_makes_ours_stale(tmp_path: Path) -> None:
    t = tmp_path / "t"
    n = make_table(t, partitions=1)
    run = apply_plan(plan_for(t), target=Target(), engine=_RacedEngine())
    (r,) = run.results
    assert r.status == "stale" and "removed by a concurrent commit" in r.error
    assert on_disk_unreferenced(t) == set()  # our outputs were deleted
    exactly_once(t, n)


def test_a_compaction_that_lands_inside_the_commit_window_makes_ours_stale(tmp_path: Path, monkeypatch) -> None:
    """The other tool commits after compactor's last re-check and before its commit: compactor writes its
    commit only at a version it has checked (formats/delta/apply/log_writer.py), so the version the other tool took
    is read, its removes found, and nothing of compactor's is committed: no rows live twice at all."""
    t = tmp_path / "t"
    n = make_table(t, partitions=1)
    recheck = commit_mod.removed_since

    def recheck_then_race(*args, **kwargs):
        found = recheck(*args, **kwargs)
        DeltaTable(str(t)).optimize.compact()  # lands between the re-check and our commit
        return found

    monkeypatch.setattr(commit_mod, "removed_since", recheck_then_race)
    run = apply_plan(plan_for(t), target=Target())
    (r,) = run.results
    assert r.status == "stale" and "removed 8 file(s) this commit removes" in r.error, r.error
    assert on_disk_unreferenced(t) == set()  # our outputs were deleted
    exactly_once(t, n)


def test_post_commit_scan_repairs_a_compaction_that_lands_inside_delta_rs_commit_window(tmp_path: Path,
                                                                                        monkeypatch) -> None:
    """Where delta-rs writes compactor's commit (a store reached through a locking provider, a writer feature
    compactor's log writer does not know), the window is open: compactor's commit duplicates rows, finds it
    and repairs at once."""
    from compactor.formats.delta.apply import log_writer
    t = tmp_path / "t"
    n = make_table(t, partitions=1)
    recheck = commit_mod.removed_since

    def recheck_then_race(*args, **kwargs):
        found = recheck(*args, **kwargs)
        DeltaTable(str(t)).optimize.compact()  # lands between the re-check and our commit
        return found

    monkeypatch.setattr(commit_mod, "removed_since", recheck_then_race)
    monkeypatch.setattr(log_writer, "writes_directly", lambda dt, where: False)
    run = apply_plan(plan_for(t), target=Target())
    (r,) = run.results
    assert r.status == "success", r.error
    assert r.details.repaired.overlapping_removes == 8
    exactly_once(t, n)  # without the repair every row would be there twice


def _rewrite_two_files(path: Path) -> None:
    """Another tool compacts only the first two files: a real dataChange=false rewrite committed
    through delta-rs (as a Spark-based compactor would)."""
    import json
    import time
    import uuid

    import pyarrow as pa
    import pyarrow.parquet as pq
    from deltalake.transaction import AddAction, RemoveAction

    dt_ = DeltaTable(str(path))
    files = pa.table(dt_.get_add_actions(flatten=True)).to_pylist()[:2]
    data = pa.concat_tables([pq.read_table(path / f["path"]) for f in files])
    rel = f"date=2024-01-01/part-other-{uuid.uuid4().hex}.parquet"
    pq.write_table(data, path / rel)
    now = int(time.time() * 1000)
    actions = [AddAction(rel, (path / rel).stat().st_size, {"date": "2024-01-01"}, now, False,
                         json.dumps({"numRecords": data.num_rows}))]
    actions += [RemoveAction(f["path"], False, now, f["size_bytes"], {"date": "2024-01-01"}) for f in files]
    dt_.create_write_transaction(actions, mode="append", schema=dt_.schema(), partition_by=["date"])


def test_repair_readds_files_only_we_removed(tmp_path: Path) -> None:
    """Partial overlap: the other compaction removed two of our inputs; ours removed all six."""
    from deltalake.transaction import CommitProperties

    t = tmp_path / "t"
    n = make_table(t, partitions=1, appends=6)
    state = read_delta_state(TableLocation(str(t)))
    ours = DeltaTable(str(t))
    _rewrite_two_files(t)
    ours.optimize.compact(commit_properties=CommitProperties(custom_metadata={"compactor.action": "m1"}))
    assert sum(ids(t).values()) > n  # duplicated
    own = find_commit(TableLocation(str(t)), state.version, "m1")
    overlap = delta_guard.overlapping_removes(TableLocation(str(t)), state.version, own.version, own.removes)
    assert len(overlap) == 2 and len(own.removes) == 6
    delta_guard.undo_commit(TableLocation(str(t)), own, overlap, {"compactor.action": "m1"})
    exactly_once(t, n)


def test_two_applies_racing_leave_every_row_once(tmp_path: Path) -> None:
    """Two compactor processes apply the same plan at the same moment."""
    t = tmp_path / "t"
    n = make_table(t, partitions=4, appends=10)
    from compactor.tasks.plan_file import write_plan

    write_plan(plan_for(t), tmp_path / "plan.json")
    script = textwrap.dedent(f"""
        import sys, time
        from compactor.tasks.apply import apply_plan
        from compactor.tasks.plan_file import load_plan
        from compactor.project.model import Target
        plan = load_plan({str(tmp_path / 'plan.json')!r})
        start = float(sys.argv[1])
        while time.time() < start: pass
        run = apply_plan(plan, target=Target())
        print(",".join(r.status for r in run.results))
    """)
    import time

    start = time.time() + 3
    procs = [subprocess.Popen([sys.executable, "-c", script, str(start)], stdout=subprocess.PIPE,
                              stderr=subprocess.PIPE, text=True) for _ in range(2)]
    outs = [p.communicate(timeout=120) for p in procs]
    statuses = [o[0].strip() for o in outs]
    assert all(p.returncode == 0 for p in procs), outs
    exactly_once(t, n)
    # the lease serialises them: the loser finds the lease held (error) or its plan stale
    flat = ",".join(statuses).split(",")
    assert flat.count("success") == 4, statuses
