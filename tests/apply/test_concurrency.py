"""The delta-rs 1.6 duplicate-compaction hazard, and compactor's guards against it."""

from __future__ import annotations

import subprocess
import sys
import textwrap
from pathlib import Path

import pytest
from deltalake import DeltaTable

from compactor.apply.runner import apply_plan
from compactor.engines import delta_guard
from compactor.engines.local import LocalEngine
from compactor.project.model import Target

from tests.apply.helpers import exactly_once, ids, make_table, plan_for


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
    """The local engine, with another tool's compaction committing right after compactor loaded its
    snapshot: exactly the race window between compactor's re-check and delta-rs' commit."""

    def _table(self, uri: str) -> DeltaTable:
        ours = DeltaTable(uri)
        DeltaTable(uri).optimize.compact()  # the other tool wins the race
        return ours


def test_post_commit_scan_repairs_a_racing_compaction(tmp_path: Path) -> None:
    t = tmp_path / "t"
    n = make_table(t, partitions=1)
    plan = plan_for(t)
    run = apply_plan(plan, target=Target(), engine=_RacedEngine())
    (r,) = run.results
    assert r.status == "success", r.error
    assert r.details["repaired"]["overlapping_removes"] == 8
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


@pytest.mark.parametrize("form", ["paths", "commit"])
def test_repair_readds_files_only_we_removed(tmp_path: Path, form: str) -> None:
    """Partial overlap: the other compaction removed two of our inputs; ours removed all six."""
    t = tmp_path / "t"
    n = make_table(t, partitions=1, appends=6)
    ours = DeltaTable(str(t))
    read_v = ours.version()
    _rewrite_two_files(t)
    from deltalake.transaction import CommitProperties

    ours.optimize.compact(commit_properties=CommitProperties(custom_metadata={"compactor.action": "m1"}))
    assert sum(ids(t).values()) > n  # duplicated
    own = delta_guard.find_own_commit(str(t), None, read_v, "m1")
    overlap = delta_guard.find_overlapping_removes(str(t), None, read_v, own.version, own.removes)
    assert len(overlap) == 2 and len(own.removes) == 6
    if form == "paths":
        delta_guard.repair_duplicate_commit(str(t), None, list(own.adds), list(own.removes), overlap,
                                            own_version=own.version, commit_metadata={"compactor.action": "m1:repair"})
    else:  # the form the spark engine uses: the Commit found by find_own_commit
        delta_guard.repair_duplicate_commit(str(t), None, own, overlap, {"compactor.action": "m1:repair"}, {})
    exactly_once(t, n)


def test_two_applies_racing_leave_every_row_once(tmp_path: Path) -> None:
    """Two compactor processes apply the same plan at the same moment."""
    t = tmp_path / "t"
    n = make_table(t, partitions=4, appends=10)
    from compactor.planning.io import write_plan

    write_plan(plan_for(t), tmp_path / "plan.json")
    script = textwrap.dedent(f"""
        import sys, time
        from compactor.apply.runner import apply_plan
        from compactor.planning.io import load_plan
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
