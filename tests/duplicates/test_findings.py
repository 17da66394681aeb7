"""Regression tests for the duplicate-repair findings of issue 18, on real delta-rs tables, through the
CLI as a user runs it. Each failed on main before the lineage replay and the planned, content-proved repair."""

from __future__ import annotations

import json
from pathlib import Path

import pyarrow as pa
from click.testing import CliRunner
from deltalake import DeltaTable, write_deltalake

from compactor.cli import cli
from compactor.formats.delta.duplicates.repair import readd_horizon_s, repair
from compactor.formats.delta.read.log import read_commit
from compactor.models.table import TableLocation
from compactor.runtime import clock
from tests.apply.helpers import exactly_once, ids, make_table, one_table_project


def run(*args: str):
    return CliRunner().invoke(cli, list(args), catch_exceptions=False)


def _append(t: Path, start: int, n: int) -> None:
    write_deltalake(str(t), pa.table({"id": pa.array(range(start, start + n), pa.int64())}), mode="append")


def test_finding_1_delete_then_restore_is_no_duplicate_and_no_row_is_lost(tmp_path: Path) -> None:
    """Append A (ids 0-4), append B (5-9), a DELETE of every row of A, RESTORE to version 1, compactor
    compacts A+B. The RESTORE's re-add of A is an adds-only commit: the scan that skipped those saw A
    removed by the DELETE, compactor's compaction as a second removal, and "repaired" ids 0-4 away."""
    t = tmp_path / "lake" / "t"
    _append(t, 0, 5)
    _append(t, 5, 5)
    DeltaTable(str(t)).delete("id < 5")
    DeltaTable(str(t)).restore(1)
    proj = one_table_project(tmp_path / "proj", t)
    first = run("apply", "--project-dir", str(proj), "--auto-approve")
    assert first.exit_code == 0, first.output
    exactly_once(t, 10)
    plan = run("plan", "--project-dir", str(proj), "--format", "json")
    assert plan.exit_code == 0, plan.output
    (table,) = json.loads(plan.output)["tables"]
    assert "blockers" not in table and all(a["type"] != "repair" for a in table["actions"])
    again = run("apply", "--project-dir", str(proj), "--auto-approve")
    assert again.exit_code == 0, again.output
    assert "repaired" not in again.output
    exactly_once(t, 10)
    assert run("repair", str(t), "--auto-approve").exit_code == 0
    exactly_once(t, 10)


def _duplicated(t: Path) -> int:
    """Two compactions of the same files, the second from a snapshot read before the first: rows live
    twice, and the repair must restore a file only the second compaction removed."""
    from tests.apply.test_concurrency import _rewrite_two_files

    n = make_table(t, partitions=1, appends=6, rows=10)
    later = DeltaTable(str(t))
    _rewrite_two_files(t)
    later.optimize.compact()
    assert sum(ids(t).values()) == n + 20
    return n


def test_finding_4_a_file_vacuum_may_delete_is_restored_as_a_copy_never_re_added(tmp_path: Path) -> None:
    """A repair re-added files whose tombstones were older than the table's deleted-file retention; a
    VACUUM that had listed them (another tool's, without compactor's lease) then deleted files the log
    calls live. Now: a tombstone older than the retention minus the margin is restored as a byte copy
    under a new name, so what VACUUM deletes is never live."""
    t = tmp_path / "t"
    n = _duplicated(t)
    DeltaTable(str(t)).alter.set_table_properties({"delta.deletedFileRetentionDuration": "interval 2 days"})
    vacuum = DeltaTable(str(t))  # another tool's VACUUM read the table before the repair...
    clock.advance(readd_horizon_s(2 * 24 * 3600) + 60)  # ...when the tombstones were old enough for it
    try:
        res = repair(TableLocation(str(t)))
    finally:
        clock.advance(-(readd_horizon_s(2 * 24 * 3600) + 60))
    assert (res.status, res.files_restored, res.files_copied) == ("repaired", 4, 4)
    commit = read_commit(TableLocation(str(t)), res.commits[0])
    copies = json.loads(commit.metadata("compactor.repair_copies"))
    assert set(copies) == set(commit.adds) and not set(copies.values()) & set(commit.adds)
    exactly_once(t, n)
    vacuum.vacuum(retention_hours=0, enforce_retention_duration=False, dry_run=False)
    live = DeltaTable(str(t))
    assert all(Path(u).exists() for u in live.file_uris()), "the log references a file VACUUM deleted"
    exactly_once(t, n)
    assert repair(TableLocation(str(t))).status == "clean"


def test_a_young_tombstone_is_re_added_in_place(tmp_path: Path) -> None:
    t = tmp_path / "t"
    n = _duplicated(t)
    res = repair(TableLocation(str(t)))
    assert (res.status, res.files_restored, res.files_copied) == ("repaired", 4, 0)
    assert read_commit(TableLocation(str(t)), res.commits[0]).metadata("compactor.repair_copies") is None
    exactly_once(t, n)


def test_a_repair_whose_content_does_not_add_up_is_refused(tmp_path: Path) -> None:
    """The content proof: the file the repair would remove is replaced on storage by one holding other
    rows (what a corrupted or hand-edited file looks like); nothing is committed."""
    import pyarrow.parquet as pq

    from compactor.formats.delta.duplicates.repair import detect

    t = tmp_path / "t"
    n = _duplicated(t)
    (victim,) = detect(TableLocation(str(t))).proposal.remove
    rows = pq.read_table(t / victim)
    pq.write_table(rows.set_column(0, "id", pa.array([i + 1000 for i in rows.column("id").to_pylist()])), t / victim)
    v = DeltaTable(str(t)).version()
    r = run("repair", str(t), "--auto-approve")
    assert r.exit_code == 1 and "nothing was committed" in r.output
    assert DeltaTable(str(t)).version() == v
    assert sum(ids(t).values()) == n + 20
