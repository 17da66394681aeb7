"""`retention.vacuum.dry_run_first`: a VACUUM deletes only files the reviewed plan lists.

The plan lists the files a VACUUM would delete (compactor's own listing by the deletion gate's rule,
formats/delta/read/vacuum_listing.py); apply lists them again
first and deletes nothing unless the plan holds every one; the plan's list is in its precondition digest,
so an edited list is an edited plan. Real delta-rs tables, the real CLI; the Spark side is in
tests/engines/test_spark_engine.py."""

from __future__ import annotations

import json
import os
import time
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from click.testing import CliRunner
from deltalake import DeltaTable
from rich.console import Console

from compactor.cli import cli
from compactor.formats.delta.plan.actions import VacuumAction
from compactor.formats.delta.read.vacuum_listing import vacuum_candidates
from compactor.models.events import ActionFinished
from compactor.models.table import TableLocation
from compactor.output.apply_render import ProgressPrinter
from compactor.planning.plan import Plan
from compactor.project.model import Target
from compactor.tasks.apply import apply_plan
from tests.apply.helpers import (
    apply_racing_the_vacuum,
    exactly_once,
    listed_vacuum,
    make_table,
    one_action_plan,
    one_table_project,
    vacuum_reviewing,
)


def _plan(t: Path, action: VacuumAction) -> Plan:
    return one_action_plan(str(t), action)


def _removed_table(t: Path) -> int:
    """A table whose deleted files may be vacuumed at once, with 5 of them removed by a compaction."""
    n = make_table(t, partitions=1, appends=5)
    DeltaTable(str(t)).alter.set_table_properties({"delta.deletedFileRetentionDuration": "interval 0 hours"})
    DeltaTable(str(t)).optimize.compact()
    return n


def _on_disk(t: Path) -> set[str]:
    return {p.relative_to(t).as_posix() for p in t.rglob("*.parquet")}


def test_apply_deletes_exactly_the_files_the_plan_lists(tmp_path: Path) -> None:
    t = tmp_path / "t"
    n = _removed_table(t)
    action = listed_vacuum(str(t))
    assert action.files is not None and len(action.files) == 5
    before = _on_disk(t)
    run = apply_plan(_plan(t, action), target=Target())
    (r,) = run.results
    assert r.status == "success", r.error
    assert r.files_removed == 5 and set(r.details.files) == set(action.files)
    assert _on_disk(t) == before - set(action.files)
    exactly_once(t, n)


def test_a_file_old_enough_since_the_plan_stops_the_vacuum_before_anything_is_deleted(tmp_path: Path) -> None:
    t = tmp_path / "t"
    n = _removed_table(t)
    action = listed_vacuum(str(t))
    n = make_table(t, partitions=1, appends=2, start=n)
    DeltaTable(str(t)).optimize.compact()  # removes 3 more files, deletable at once: not in the plan's list
    before = _on_disk(t)
    run = apply_plan(_plan(t, action), target=Target())
    (r,) = run.results
    assert r.status == "error" and "VACUUM would now delete 3 file(s) the reviewed plan did not list" in r.error
    assert "nothing was deleted" in r.error and not run.ok
    assert _on_disk(t) == before
    # without dry_run_first the vacuum takes whatever is old enough when it runs
    run = apply_plan(_plan(t, vacuum_reviewing(action.files, dry_run_first=False)), target=Target())
    assert run.ok and run.results[0].files_removed == 8
    exactly_once(t, n)


def test_a_plan_that_could_not_list_the_files_is_refused_unless_dry_run_first_is_off(tmp_path: Path) -> None:
    t = tmp_path / "t"
    n = _removed_table(t)
    before = _on_disk(t)
    run = apply_plan(_plan(t, vacuum_reviewing(None)), target=Target())
    (r,) = run.results
    assert r.status == "error" and "the plan does not list the files this VACUUM would delete" in r.error
    assert _on_disk(t) == before
    run = apply_plan(_plan(t, vacuum_reviewing(None, dry_run_first=False)), target=Target())
    assert run.ok and run.results[0].files_removed == 5
    exactly_once(t, n)


def test_files_removed_between_the_listing_and_the_delete_are_not_deleted(tmp_path: Path) -> None:
    """An optimize commits between apply's listing and its delete (zero retention: the files it removed
    are deletable at once): only the listed files are deleted; the optimize's stay, and the log names no
    missing file. delta-rs' own VACUUM would list the table again as it deletes and take them."""
    t = tmp_path / "t"
    n = _removed_table(t)
    action = listed_vacuum(str(t))
    raced: set[str] = set()

    def race() -> None:
        make_table(t, partitions=1, appends=2, start=n)
        live = set(DeltaTable(str(t)).file_uris())
        DeltaTable(str(t)).optimize.compact()
        raced.update(Path(u).relative_to(t).as_posix() for u in live - set(DeltaTable(str(t)).file_uris()))

    run = apply_racing_the_vacuum(_plan(t, action), race, target=Target())
    (r,) = run.results
    assert r.status == "success", r.error
    assert action.files is not None and r.files_removed == len(action.files) == 5
    assert set(r.details.files) == set(action.files) and not set(action.files) & _on_disk(t)
    assert len(raced) == 3 and raced <= _on_disk(t)
    exactly_once(t, n + 100)  # the log references no missing file (the race appended ids n..n+99)


def test_a_file_a_commit_since_the_listing_re_adds_is_not_deleted(tmp_path: Path) -> None:
    """A RESTORE between apply's listing and its delete re-adds listed files: they are live again and
    stay; the rest of the list is deleted."""
    t = tmp_path / "t"
    n = _removed_table(t)  # version 5 appends, one compaction: the 5 appends' files removed
    action = listed_vacuum(str(t))
    compacted_at = DeltaTable(str(t)).version()

    def restore() -> None:
        DeltaTable(str(t)).restore(compacted_at - 1)  # the 5 files live again, the compaction's removed

    run = apply_racing_the_vacuum(_plan(t, action), restore, target=Target())
    (r,) = run.results
    assert r.status == "success", r.error
    assert action.files is not None and len(action.files) == 5
    assert r.files_removed == 0 and set(action.files) <= _on_disk(t)
    assert r.details.kept == {f: "a live file" for f in action.files}  # the run says which, and why
    exactly_once(t, n)
    console = Console(record=True, width=200)
    ProgressPrinter(console)(ActionFinished("t", r))
    assert f"kept 5 listed file(s) the table references now, e.g. {sorted(action.files)[0]}: a live file" in \
        console.export_text()


def test_a_retention_raised_between_the_listing_and_the_delete_stops_the_vacuum(tmp_path: Path) -> None:
    """The table's retention as stored is checked again right before the delete: raised to 7 days after
    apply listed the files, nothing is deleted (delta-rs' and delta-spark's VACUUM refuse the same)."""
    t = tmp_path / "t"
    n = _removed_table(t)
    action = listed_vacuum(str(t))
    before = _on_disk(t)

    def raise_retention() -> None:
        DeltaTable(str(t)).alter.set_table_properties({"delta.deletedFileRetentionDuration": "interval 7 days"})

    run = apply_racing_the_vacuum(_plan(t, action), raise_retention, target=Target())
    (r,) = run.results
    assert r.status == "error" and "vacuum retention 0h is below the table's" in r.error, r.error
    assert _on_disk(t) == before
    exactly_once(t, n)


def test_apply_dry_run_predicts_the_refusal(tmp_path: Path) -> None:
    t = tmp_path / "t"
    _removed_table(t)
    action = listed_vacuum(str(t))
    make_table(t, partitions=1, appends=2, start=10_000)
    DeltaTable(str(t)).optimize.compact()
    before = _on_disk(t)
    run = apply_plan(_plan(t, action), target=Target(), dry_run=True)
    assert "did not list" in (run.results[0].error or "")
    assert _on_disk(t) == before


def _orphan(t: Path, days: float) -> str:
    """A data file the log never named (a writer that died before its commit), ``days`` old."""
    rel = "date=2024-01-01/part-00000-orphan.parquet"
    pq.write_table(pa.table({"id": [1]}), t / rel)
    old = time.time() - days * 86400
    os.utime(t / rel, (old, old))
    return rel


def _project(tmp_path: Path, t: Path) -> Path:
    p = one_table_project(tmp_path / "proj", t)
    (p / "policies" / "t.yml").write_text((p / "policies" / "t.yml").read_text()
                                          + "    retention: {deleted_file_retention: 7d, vacuum: {enabled: true}}\n")
    return p


def _vacuum_params(plan_file: Path) -> dict:
    doc = json.loads(plan_file.read_text())
    return next(a for a in doc["tables"][0]["actions"] if a["type"] == "vacuum")["params"]


def test_the_plan_lists_the_files_and_an_edited_list_is_refused(tmp_path: Path) -> None:
    t = tmp_path / "lake" / "t"
    n = make_table(t, partitions=1, appends=1)
    orphan = _orphan(t, days=10)
    _orphan_young = t / "date=2024-01-01" / "part-00000-young.parquet"
    pq.write_table(pa.table({"id": [2]}), _orphan_young)  # written now: no VACUUM takes it yet
    p = _project(tmp_path, t)
    plan_file = p / "target" / "plan.json"
    r = CliRunner().invoke(cli, ["plan", "--project-dir", str(p), "--out", str(plan_file)], catch_exceptions=False)
    assert r.exit_code in (0, 2), r.output
    params = _vacuum_params(plan_file)
    assert params["files"] == [orphan] and params["files_to_delete"] == 1 and params["dry_run_first"] is True
    reviewed = plan_file.read_text()
    for edit in ({"files": []}, {"dry_run_first": False}):
        doc = json.loads(reviewed)
        next(a for a in doc["tables"][0]["actions"] if a["type"] == "vacuum")["params"].update(edit)
        plan_file.write_text(json.dumps(doc))
        r = CliRunner().invoke(cli, ["apply", str(plan_file), "--project-dir", str(p)], catch_exceptions=False)
        assert r.exit_code != 0, (edit, r.output)
        assert (t / orphan).exists()
    plan_file.write_text(reviewed)
    r = CliRunner().invoke(cli, ["apply", str(plan_file), "--project-dir", str(p)], catch_exceptions=False)
    assert r.exit_code == 0, r.output
    assert not (t / orphan).exists() and _orphan_young.exists()
    exactly_once(t, n)


def test_a_file_removed_twice_is_one_file_to_review_and_delete(tmp_path: Path) -> None:
    """Two compactions of the same files (delta-rs from a stale handle: the duplicate hazard of
    delta-compaction.md) leave two tombstones for each; delta-rs' VACUUM names each twice (its delete once
    relative, once absolute). Each is one file in the plan's list and in what apply deleted, no error."""
    t = tmp_path / "t"
    make_table(t, partitions=1, appends=3)
    DeltaTable(str(t)).alter.set_table_properties({"delta.deletedFileRetentionDuration": "interval 0 hours"})
    stale = DeltaTable(str(t))
    DeltaTable(str(t)).optimize.compact()
    stale.optimize.compact()  # removes the same 3 files again
    raw = DeltaTable(str(t)).vacuum(retention_hours=0, dry_run=True, enforce_retention_duration=False, full=True)
    assert len(raw) == 6 and len(set(raw)) == 3  # what this test is about
    action = listed_vacuum(str(t))
    assert action.files is not None and len(action.files) == 3 and action.files_to_delete == 3
    before = _on_disk(t)
    run = apply_plan(_plan(t, action), target=Target())
    (r,) = run.results
    assert r.status == "success", r.error
    assert r.files_removed == 3 and set(r.details.files) == set(action.files)
    assert _on_disk(t) == before - set(action.files)


@pytest.mark.parametrize("partitions", [1, 20])  # one listing per folder; one of the whole table past 16
def test_a_file_an_earlier_vacuum_deleted_is_not_listed_again(tmp_path: Path, partitions: int) -> None:
    """delta-rs names a removed file as long as its tombstone stays in the log, also after a VACUUM
    deleted it: the plan lists only files on storage, so a vacuumed table converges."""
    t = tmp_path / "t"
    make_table(t, partitions=partitions, appends=2)
    DeltaTable(str(t)).alter.set_table_properties({"delta.deletedFileRetentionDuration": "interval 0 hours"})
    DeltaTable(str(t)).optimize.compact()
    assert len(vacuum_candidates(TableLocation(str(t)), 0) or ()) == 2 * partitions
    DeltaTable(str(t)).vacuum(retention_hours=0, dry_run=False, enforce_retention_duration=False, full=True)
    named = DeltaTable(str(t)).vacuum(retention_hours=0, dry_run=True, enforce_retention_duration=False, full=True)
    assert len(named) == 2 * partitions  # what this test is about: named again, deleted already
    assert vacuum_candidates(TableLocation(str(t)), 0) == ()
    orphan = _orphan(t, days=1)  # a file of a writer that died: listed among them
    assert vacuum_candidates(TableLocation(str(t)), 0) == (orphan,)
    run = apply_plan(_plan(t, listed_vacuum(str(t))), target=Target())
    assert run.ok and run.results[0].files_removed == 1 and not (t / orphan).exists()
