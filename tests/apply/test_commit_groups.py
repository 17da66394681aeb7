"""Commit groups (partial progress), max_runtime and bin progress, on real delta-rs tables."""

from __future__ import annotations

import time
from pathlib import Path

from deltalake import DeltaTable

from compactor.engines.local import LocalEngine
from compactor.formats.delta.read.log import commits_after
from compactor.models.events import BinsDone
from compactor.models.table import TableLocation
from compactor.project.model import Target
from compactor.tasks.apply import apply_plan
from tests.apply.helpers import exactly_once, make_table, on_disk_unreferenced, plan_for


def _compactor_commits(t: Path, after: int) -> list:
    return [c for c in commits_after(TableLocation(str(t)), after) if c.metadata("compactor.action")]


def test_partitions_share_commits_of_at_most_commit_every_bins(tmp_path: Path) -> None:
    t = tmp_path / "t"
    n = make_table(t, partitions=5, appends=3)
    v0 = DeltaTable(str(t)).version()
    plan = plan_for(t)
    assert [len(a.bins) for a in plan.tables[0].actions] == [1] * 5
    run = apply_plan(plan, target=Target(commit_every_bins=2))
    assert run.ok and [r.status for r in run.results] == ["success"] * 5
    commits = _compactor_commits(t, v0)
    assert [len(c.removes) for c in commits] == [6, 6, 3]  # partitions 2 + 2 + 1, 3 files each
    # every member of a group reports the group's commit, and only its own files
    versions = [r.table_version_after for r in run.results]
    assert versions == [commits[0].version] * 2 + [commits[1].version] * 2 + [commits[2].version]
    assert all(r.files_removed == 3 and r.files_added == 1 for r in run.results)
    exactly_once(t, n)
    assert not plan_for(t).tables[0].actions  # converged


def test_default_groups_commit_a_small_table_once(tmp_path: Path) -> None:
    t = tmp_path / "t"
    n = make_table(t, partitions=4, appends=2)
    v0 = DeltaTable(str(t)).version()
    run = apply_plan(plan_for(t), target=Target())
    assert run.ok
    (commit,) = _compactor_commits(t, v0)
    assert len(commit.removes) == 8 and len(commit.adds) == 4
    assert commit.metadata("compactor.action").endswith(":0-3")
    exactly_once(t, n)


def test_commit_every_bytes_bounds_a_group(tmp_path: Path) -> None:
    t = tmp_path / "t"
    n = make_table(t, partitions=4, appends=2)
    plan = plan_for(t)
    one = plan.tables[0].actions[0].input_bytes
    v0 = DeltaTable(str(t)).version()
    run = apply_plan(plan, target=Target(commit_every_bytes=one))  # room for one partition per commit
    assert run.ok and len(_compactor_commits(t, v0)) == 4
    exactly_once(t, n)


class _FailsOnSecondCall(LocalEngine):
    """Rewrites the first group, fails on the second (a crashed executor, a full disk)."""

    calls = 0

    def rewrite(self, jobs, schema, on_done=None):
        type(self).calls += 1
        if type(self).calls == 2:
            raise OSError("disk full")
        return super().rewrite(jobs, schema, on_done)


def test_a_failure_keeps_the_groups_committed_before_it_and_a_rerun_finishes(tmp_path: Path) -> None:
    t = tmp_path / "t"
    n = make_table(t, partitions=4, appends=3)
    v0 = DeltaTable(str(t)).version()
    run = apply_plan(plan_for(t), target=Target(commit_every_bins=2, threads=1), engine=_FailsOnSecondCall())
    assert [r.status for r in run.results] == ["success", "success", "error", "error"]
    assert "disk full" in run.results[2].error
    assert len(_compactor_commits(t, v0)) == 1  # the first group's work survived
    assert on_disk_unreferenced(t) == set()  # the failed group's outputs were deleted
    exactly_once(t, n)
    left = plan_for(t).tables[0].actions
    assert len(left) == 2  # the next plan picks up exactly the rest
    assert apply_plan(plan_for(t), target=Target()).ok
    exactly_once(t, n)
    assert not plan_for(t).tables[0].actions


class _RemovesOnePartitionsInput(LocalEngine):
    """While compactor writes a group, another writer rewrites one input of the group's second partition."""

    def rewrite(self, jobs, schema, on_done=None):
        out = super().rewrite(jobs, schema, on_done)
        DeltaTable(str(Path(jobs[0].output).parents[1])).optimize.compact(partition_filters=[("date", "=", "2024-01-02")])
        return out


def test_a_member_whose_inputs_another_writer_removed_stays_out_and_the_rest_commits(tmp_path: Path) -> None:
    t = tmp_path / "t"
    n = make_table(t, partitions=3, appends=3)
    run = apply_plan(plan_for(t), target=Target(), engine=_RemovesOnePartitionsInput())
    status = {r.partition["date"]: r.status for r in run.results}
    assert status == {"2024-01-01": "success", "2024-01-02": "stale", "2024-01-03": "success"}
    assert "removed by a concurrent commit" in next(r.error for r in run.results if r.status == "stale")
    assert on_disk_unreferenced(t) == set()  # the stale member's output was deleted
    exactly_once(t, n)


class _Slow(LocalEngine):
    def rewrite(self, jobs, schema, on_done=None):
        time.sleep(0.4)
        return super().rewrite(jobs, schema, on_done)


def test_max_runtime_stops_starting_groups_and_the_next_run_does_the_rest(tmp_path: Path) -> None:
    t = tmp_path / "t"
    n = make_table(t, partitions=4, appends=2)
    run = apply_plan(plan_for(t), target=Target(commit_every_bins=1, max_runtime_s=0.3), engine=_Slow())
    statuses = [r.status for r in run.results]
    assert statuses[0] == "success" and statuses[-1] == "skipped", statuses
    skipped = [r for r in run.results if r.status == "skipped"]
    assert all(r.details.max_runtime for r in skipped) and run.ok
    exactly_once(t, n)
    assert len(plan_for(t).tables[0].actions) == len(skipped)
    assert apply_plan(plan_for(t), target=Target()).ok
    exactly_once(t, n)
    assert not plan_for(t).tables[0].actions


def test_progress_reports_bins_and_bytes_per_table(tmp_path: Path) -> None:
    t = tmp_path / "t"
    make_table(t, partitions=3, appends=2)
    plan = plan_for(t)
    total = sum(a.input_bytes for a in plan.tables[0].actions)
    events: list[BinsDone] = []
    run = apply_plan(plan, target=Target(), progress=lambda e: events.append(e) if isinstance(e, BinsDone) else None)
    assert run.ok
    assert [e.bins_done for e in events] == [1, 2, 3] and {e.bins_total for e in events} == {3}
    assert events[-1].bytes_done == events[-1].bytes_total == total
