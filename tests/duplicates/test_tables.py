"""Duplicate rewrites on real Delta tables (delta-rs), found from the log and repaired: issue #11.

The defect: an ordinary ``DeltaTable(...).optimize.compact()`` that loaded the table before compactor
committed commits after it; delta-rs lets it remove the same files again and every row of them is live
twice."""

from __future__ import annotations

import json
import threading
import time
from pathlib import Path

import jsonschema
import pytest
from click.testing import CliRunner
from deltalake import DeltaTable

from compactor.cli import cli
from compactor.formats.delta.duplicates.repair import detect, repair
from compactor.formats.delta.read.log import read_commit
from compactor.models.table import TableLocation
from compactor.policy.schema import load_schema
from compactor.project.model import Target
from compactor.tasks.apply import apply_plan
from tests.apply.helpers import exactly_once, ids, make_table, one_table_project, plan_for


def run(*args: str):
    return CliRunner().invoke(cli, list(args), catch_exceptions=False)


def _after_compactor_commits(t: Path, other: DeltaTable, started: float) -> threading.Thread:
    """Commit ``other``'s compaction (its snapshot is older) as soon as compactor's commit is in the log."""
    def go() -> None:
        v = other.version()
        while time.monotonic() - started < 60:
            c = read_commit(TableLocation(str(t)), v + 1)
            if c is None:
                time.sleep(0.02)
                continue
            if c.metadata("compactor.action"):
                other.optimize.compact()
                return
            v += 1

    th = threading.Thread(target=go)
    th.start()
    return th


def test_an_external_compaction_committing_after_compactor_is_found_by_the_watch_and_repaired_by_the_next_plan(
        tmp_path: Path) -> None:
    """The defect reproduced (8 of 8 tries before): compactor commits first, the other job afterwards. The
    watch reports it and fails the run; the repair is not improvised: the next plan lists it as an action,
    and applying that plan leaves every row once."""
    t = tmp_path / "t"
    n = make_table(t, partitions=2, appends=4, rows=10)
    plan = plan_for(t)
    other = DeltaTable(str(t))  # the other job read the table before compactor committed
    th = _after_compactor_commits(t, other, time.monotonic())
    run_ = apply_plan(plan, target=Target(), watch_s=3.0)
    th.join()
    assert not run_.ok
    named = [r.details.duplicated_later for r in run_.results if r.details.duplicated_later is not None]
    assert named, "the run results name the duplicate"
    (other_version,) = named[0].conflicting_versions  # the other job's commit, not one of compactor's
    assert read_commit(TableLocation(str(t)), other_version).metadata("compactor.action") is None
    assert sum(ids(t).values()) == 2 * n  # nothing repaired unplanned
    fix = plan_for(t)
    (table,) = fix.tables
    assert table.actions[0].type == "repair" and other_version in table.actions[0].params()["anomalies"]
    assert apply_plan(fix, target=Target(), watch_s=0).ok
    exactly_once(t, n)
    assert detect(TableLocation(str(t))).open == []


def _duplicated_by_a_race(tmp_path: Path) -> tuple[Path, int, Path]:
    """A table already duplicated: compactor's compaction, then another tool's compaction of the same
    files from a snapshot read before it (no watch: nobody repaired it)."""
    t = tmp_path / "lake" / "t"
    n = make_table(t, partitions=2, appends=4, rows=10)
    other = DeltaTable(str(t))
    # one commit per partition: the duplicate spans two of compactor's commits
    run_ = apply_plan(plan_for(t), target=Target(commit_every_bins=1), watch_s=0)
    assert run_.ok
    other.optimize.compact()
    assert sum(ids(t).values()) == 2 * n
    return t, n, one_table_project(tmp_path / "proj", t)


def test_a_duplicated_table_is_reported_by_inspect_and_plan_and_repair_fixes_it_once(tmp_path: Path) -> None:
    t, n, proj = _duplicated_by_a_race(tmp_path)
    later = DeltaTable(str(t)).version()
    ours = [later - 2, later - 1]  # compactor's two commits (one per partition), then the other job's
    assert all(read_commit(TableLocation(str(t)), v).metadata("compactor.action") for v in ours)

    text = run("inspect", str(t))
    assert text.exit_code == 0 and "1 open" in text.output and f"version {later} rewrote 8 file(s)" in text.output
    assert "compactor repair" in text.output
    js = json.loads(run("inspect", str(t), "--format", "json").output)
    (d,) = [d for d in js["duplicates"] if d["status"] == "open"]
    assert d["later_version"] == later and d["earlier_versions"] == ours and d["rows"] == n

    plan = run("plan", "--project-dir", str(proj), "--format", "json", "--out", str(tmp_path / "plan.json"))
    assert plan.exit_code == 0, plan.output
    doc = json.loads(plan.output)
    jsonschema.validate(doc, load_schema("plan.schema.json"))
    (tp,) = doc["tables"]
    (blocker,) = tp["blockers"]
    dr = blocker["details"]
    assert (blocker["kind"], blocker["answered_by"]) == ("duplicate_rewrite", 0)  # the repair, action 0
    assert (dr["later_version"], dr["earlier_versions"], dr["rows"]) == (later, ours, n)
    assert doc["totals"]["blocked"] == 0  # every anomaly is answered by the planned repair
    # each partition holds compactor's file and the extra copy: compacting the two would make the
    # duplicate permanent, so the extra copies are never planned as inputs; the repair is the one action
    (rep,) = tp["actions"]
    assert rep["type"] == "repair" and rep["params"]["anomalies"] == [later] and rep["rows"] == n
    assert len(rep["params"]["remove"]) == 2 and tp["files_before"] == 4
    assert run("plan", "--project-dir", str(proj), "--detailed-exitcode").exit_code == 2

    dry = run("repair", str(t), "--dry-run", "--format", "json")
    assert dry.exit_code == 0 and json.loads(dry.output)["tables"][0]["status"] == "would_repair"
    assert sum(ids(t).values()) == 2 * n  # a dry run commits nothing
    unapproved = run("repair", "--project-dir", str(proj))
    assert unapproved.exit_code == 2 and "--auto-approve" in unapproved.output
    assert sum(ids(t).values()) == 2 * n

    fixed = run("repair", "--project-dir", str(proj), "--auto-approve")
    assert fixed.exit_code == 0, fixed.output
    assert f"version {later} (double_remove) made {n:,} rows of 8 file(s)" in fixed.output
    assert f"{n:,} duplicated rows gone" in fixed.output
    exactly_once(t, n)
    again = run("repair", "--project-dir", str(proj), "--format", "json")
    assert again.exit_code == 0 and json.loads(again.output)["tables"][0]["status"] == "clean"
    exactly_once(t, n)
    assert run("plan", "--project-dir", str(proj)).exit_code == 0
    after = json.loads(run("inspect", str(t), "--format", "json").output)
    assert [d["status"] for d in after["duplicates"]] == ["repaired"]


def test_a_planned_repair_runs_first_then_the_compaction(tmp_path: Path) -> None:
    t, n, _ = _duplicated_by_a_race(tmp_path)
    make_table(t, partitions=2, appends=2, rows=10, start=n)  # more small files to compact
    n += 40
    plan = plan_for(t)
    assert [a.type for a in plan.tables[0].actions][0] == "repair"
    run_ = apply_plan(plan, target=Target(), watch_s=0)
    assert run_.results[0].type == "repair" and run_.results[0].status == "success"
    assert run_.results[0].details.repair["rows_deduplicated"] == n - 40
    assert run_.ok, [(r.type, r.status, r.error) for r in run_.results]
    exactly_once(t, n)


def test_the_later_commit_removed_more_files_than_the_earlier_one_they_are_restored(tmp_path: Path) -> None:
    """The earlier compaction took 2 files, the later one all 6: the repair removes the later one's output
    and re-adds the 4 files only it removed (still on storage), rows checked from their footers."""
    from tests.apply.test_concurrency import _rewrite_two_files

    t = tmp_path / "t"
    n = make_table(t, partitions=1, appends=6, rows=10)
    later = DeltaTable(str(t))
    _rewrite_two_files(t)
    later.optimize.compact()
    assert sum(ids(t).values()) == n + 20
    res = repair(TableLocation(str(t)))
    assert (res.status, res.files_removed, res.files_restored) == ("repaired", 1, 4)
    assert (res.rows_removed, res.rows_restored, res.rows_deduplicated) == (60, 40, 20)
    exactly_once(t, n)
    restored = read_commit(TableLocation(str(t)), res.commits[0])
    assert all(json.loads(a["stats"])["numRecords"] == 10 for a in restored.adds.values())
    assert not restored.data_change
    # the restored files are ordinary live files again: compacting them later is no duplicate
    DeltaTable(str(t)).optimize.compact()
    exactly_once(t, n)
    assert detect(TableLocation(str(t))).open == []


def test_three_compactions_of_the_same_files_converge_in_one_repair(tmp_path: Path) -> None:
    t = tmp_path / "t"
    n = make_table(t, partitions=1, appends=4, rows=10)
    handles = [DeltaTable(str(t)) for _ in range(3)]
    for h in handles:
        h.optimize.compact()
    assert sum(ids(t).values()) == 3 * n
    assert len(detect(TableLocation(str(t))).open) == 2
    assert repair(TableLocation(str(t))).status == "repaired"
    exactly_once(t, n)
    assert repair(TableLocation(str(t))).status == "clean"


def test_two_repairs_racing_converge(tmp_path: Path, monkeypatch) -> None:
    """Two repairs planned on the same snapshot: the second finds the first's commit at the version it would
    take, removing the same files, and commits nothing (StalePlanError; formats/delta/apply/log_writer.py): no
    new duplicate, nothing lost. (Through delta-rs both committed, the second removing files already
    removed and re-adding files already live, and converged too.)"""
    import pytest

    import compactor.formats.delta.duplicates.repair as rep
    from compactor.errors import StalePlanError

    t = tmp_path / "t"
    n = make_table(t, partitions=1, appends=6, rows=10)
    from tests.apply.test_concurrency import _rewrite_two_files

    later = DeltaTable(str(t))
    _rewrite_two_files(t)
    later.optimize.compact()
    real = rep._touched_since
    raced: list[int] = []

    def race_once(*args, **kwargs):
        if not raced:
            raced.append(1)
            repair(TableLocation(str(t)))  # the other repair commits between our re-check and our commit
            return None
        return real(*args, **kwargs)

    monkeypatch.setattr(rep, "_touched_since", race_once)
    with pytest.raises(StalePlanError, match="this commit removes"):
        repair(TableLocation(str(t)))
    exactly_once(t, n)
    monkeypatch.setattr(rep, "_touched_since", real)
    assert repair(TableLocation(str(t))).status == "clean"


def test_detection_works_after_checkpoints_and_log_cleanup(tmp_path: Path) -> None:
    """Only the JSON commits still in _delta_log are scanned: older ones are gone after a checkpoint and
    log cleanup, and the window starts at the first one present."""
    t = tmp_path / "t"
    n = make_table(t, partitions=1, appends=8, rows=5)
    dt = DeltaTable(str(t))
    dt.create_checkpoint()
    cp = dt.version()
    for v in range(cp - 3):  # what log cleanup removes: commits older than the retention, behind a checkpoint
        (t / "_delta_log" / f"{v:020d}.json").unlink()
    n = make_table(t, partitions=1, appends=2, rows=5, start=n)
    a, b = DeltaTable(str(t)), DeltaTable(str(t))
    a.optimize.compact()
    b.optimize.compact()
    found = detect(TableLocation(str(t)))
    assert found.first_version == cp - 3 and len(found.open) == 1
    assert found.open[0].rows == n  # from the log's numRecords, files added before the window from footers
    assert repair(TableLocation(str(t))).status == "repaired"
    exactly_once(t, n)
    # a horizon shorter than the distance between the two commits cannot see the duplicate
    assert detect(TableLocation(str(t)), horizon=1).open == []


def test_data_changing_commits_never_race_a_compaction_in_delta_rs(tmp_path: Path) -> None:
    """Measured: delta-rs refuses DELETE/UPDATE/MERGE over a concurrent compaction and a compaction over a
    concurrent DELETE, so only dataChange=false commits can remove the same files twice."""
    from deltalake.exceptions import CommitFailedError

    t = tmp_path / "t"
    make_table(t, partitions=1, appends=3, rows=5)
    stale = DeltaTable(str(t))
    DeltaTable(str(t)).optimize.compact()
    with pytest.raises(CommitFailedError, match="concurrent"):
        stale.delete("id = 3")
    t2 = tmp_path / "t2"
    make_table(t2, partitions=1, appends=3, rows=5)
    stale = DeltaTable(str(t2))
    DeltaTable(str(t2)).delete("id = 3")
    with pytest.raises(CommitFailedError, match="concurrent"):
        stale.optimize.compact()
    assert detect(TableLocation(str(t))).open == [] and detect(TableLocation(str(t2))).open == []


def test_inspect_warns_about_auto_compaction_under_a_policy(tmp_path: Path) -> None:
    t = tmp_path / "lake" / "t"
    make_table(t, partitions=1, appends=2, rows=5)
    DeltaTable(str(t)).alter.set_table_properties({"delta.autoOptimize.autoCompact": "true"})
    proj = one_table_project(tmp_path / "proj", t)
    r = run("inspect", str(t), "--project-dir", str(proj), "--table", "t", "--format", "json")
    assert r.exit_code == 0, r.output
    (w,) = json.loads(r.output)["warnings"]
    assert "delta.autoOptimize.autoCompact=true" in w
    plain = json.loads(run("inspect", str(t), "--format", "json").output)
    assert plain["warnings"] == [] and any("autoCompact" in x for x in plain["recommendations"])


def test_cli_apply_watches_for_the_profiles_window_and_names_the_duplicate(tmp_path: Path, monkeypatch) -> None:
    """`compactor apply` end to end: the watch window comes from the profile (COMPACTOR_WATCH_WINDOW, set
    to 0 for the test suite, is removed); the run exits 1 and its JSON results name the duplicate."""
    monkeypatch.delenv("COMPACTOR_WATCH_WINDOW", raising=False)
    t = tmp_path / "lake" / "t"
    n = make_table(t, partitions=2, appends=4, rows=10)
    proj = one_table_project(tmp_path / "proj", t)
    (proj / "profiles.yml").write_text("default:\n  outputs:\n    dev: {engine: local, watch_window: 3s}\n")
    other = DeltaTable(str(t))
    th = _after_compactor_commits(t, other, time.monotonic())
    r = run("apply", "--project-dir", str(proj), "--auto-approve", "--format", "json")
    th.join()
    assert r.exit_code == 1, r.output
    doc = json.loads(r.output[r.output.index("{"):])
    jsonschema.validate(doc, load_schema("run_results.schema.json"))
    named = [x["details"]["duplicated_later"] for x in doc["results"] if "duplicated_later" in x["details"]]
    assert named and named[0]["conflicting_versions"]
    fixed = run("repair", "--project-dir", str(proj), "--auto-approve")
    assert fixed.exit_code == 0, fixed.output
    exactly_once(t, n)


def test_the_watch_window_setting(tmp_path: Path, monkeypatch) -> None:
    from compactor.errors import ProjectError
    from compactor.project.loader import load_project, load_target

    proj = tmp_path / "p"
    proj.mkdir()
    (proj / "compactor.yml").write_text("name: p\n")
    project, _ = load_project(proj, {})
    monkeypatch.delenv("COMPACTOR_WATCH_WINDOW", raising=False)
    assert load_target(project, None, None)[0].watch_window_s == 0  # the default: off (README, Safety model)
    (proj / "profiles.yml").write_text("default:\n  outputs:\n    dev: {engine: local, watch_window: 90s}\n")
    assert load_target(project, None, None)[0].watch_window_s == 90
    monkeypatch.setenv("COMPACTOR_WATCH_WINDOW", "0")
    assert load_target(project, None, None)[0].watch_window_s == 0
    monkeypatch.setenv("COMPACTOR_WATCH_WINDOW", "soon")
    with pytest.raises(ProjectError, match="COMPACTOR_WATCH_WINDOW"):
        load_target(project, None, None)
