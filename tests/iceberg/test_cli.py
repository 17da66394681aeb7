"""An Iceberg table under a policy, end to end through the CLI with the local engine (no JVM): the target's
SQL catalog names it; `compactor validate`, `compactor plan` lists the exact files of each bin,
`compactor apply target/plan.json` replaces exactly them in one ``replace`` snapshot (rows the same multiset,
time travel to the planned snapshot returns the old rows), and the next plan plans nothing. A change after
planning: an append is untouched, an overwrite of a planned file makes that action stale and commits
nothing. A table with position deletes is skipped on the local engine, naming the spark engine; a missing
table or catalog is exit 1 with one line."""

from __future__ import annotations

from pathlib import Path

import pytest

pytest.importorskip("pyiceberg", reason="pyiceberg is not installed (pip install 'compactor[iceberg]')")

from compactor.formats.iceberg.state import state_of  # noqa: E402
from tests.iceberg.project import Project, policy, profiles  # noqa: E402
from tests.iceberg.tables import (  # noqa: E402
    append,
    catalog,
    commit_position_deletes,
    leftovers,
    make_table,
    overwrite_file,
    rows,
)


def _one_line_error(out: str) -> None:
    assert "Traceback" not in out, out


@pytest.mark.parametrize("kind", ["identity_int", "unpartitioned", "day", "schema_evolution"])
def test_plan_apply_replaces_exactly_the_planned_bins_and_converges(tmp_path: Path, kind: str) -> None:
    t = make_table(tmp_path, kind)
    before = rows(t)
    planned = state_of(t, f"db.{kind}")
    project = Project.make(tmp_path, kind)

    r = project.cli("validate")
    assert r.exit_code == 0, r.output
    r = project.cli("plan")
    assert r.exit_code == 0, r.output
    table = project.table_plan()
    assert table["format"] == "iceberg" and table["identifier"] == {"catalog": "cat", "namespace": "db", "table": kind}
    assert table["version"] == planned.snapshot_id
    bins = project.bins()
    by_partition: dict[object, set[str]] = {}
    for f in planned.files:
        by_partition.setdefault(f.partition_key, set()).add(f.path)
    assert sorted(map(sorted, bins)) == sorted(map(sorted, by_partition.values()))  # one bin per partition
    assert all(p.startswith("file://") for b in bins for p in b)  # each file as the manifests name it

    r = project.cli("apply", str(project.plan_file))
    assert r.exit_code == 0, r.output
    assert [x["status"] for x in project.results()] == ["success"] * len(project.table_plan()["actions"])
    t.refresh()
    from pyiceberg.table.snapshots import ancestors_of

    chain = []  # the snapshots since the planned one: one replace per commit group (the default's: all)
    for snap in ancestors_of(t.current_snapshot(), t.metadata):
        if snap.snapshot_id == planned.snapshot_id:
            break
        chain.append(snap)
    assert len(chain) == 1
    assert {x["table_version_after"] for x in project.results()} == {chain[0].snapshot_id}
    assert all(s.summary is not None and s.summary.operation.value == "replace" for s in chain)
    assert rows(t) == before and rows(t, planned.snapshot_id) == before
    after = state_of(t, f"db.{kind}")
    removed = {p for b in bins for p in b}
    assert {f.path for f in planned.files} - {f.path for f in after.files} == removed
    assert len({f.path for f in after.files} - {f.path for f in planned.files}) == len(bins)

    assert leftovers(t) == []

    r = project.cli("plan", "--detailed-exitcode")
    assert r.exit_code == 0, r.output
    assert project.table_plan()["actions"] == []


def test_an_append_after_planning_is_untouched(tmp_path: Path) -> None:
    t = make_table(tmp_path, "identity_int")
    project = Project.make(tmp_path, "identity_int")
    assert project.cli("plan").exit_code == 0
    append(t, 99)
    t.refresh()
    appended = {f.path for f in state_of(t, "db.identity_int").files} - {p for b in project.bins() for p in b}
    before = rows(t)
    r = project.cli("apply", str(project.plan_file))
    assert r.exit_code == 0, r.output
    t.refresh()
    assert rows(t) == before
    assert appended <= {f.path for f in state_of(t, "db.identity_int").files}


def test_an_overwrite_of_a_planned_file_makes_its_action_stale_and_commits_nothing(tmp_path: Path) -> None:
    t = make_table(tmp_path, "unpartitioned")
    project = Project.make(tmp_path, "unpartitioned")
    assert project.cli("plan").exit_code == 0
    overwrite_file(t, project.bins()[0][0])
    t.refresh()
    head, before = t.current_snapshot(), rows(t)
    r = project.cli("apply", str(project.plan_file))
    assert r.exit_code == 0, r.output  # a stale action is no failure: the next plan takes the table as it is
    assert [x["status"] for x in project.results()] == ["stale"]
    t.refresh()
    assert t.current_snapshot() == head and rows(t) == before  # nothing committed
    assert leftovers(t) == []


@pytest.mark.parametrize("when", ["before_apply", "while_rewriting"])
def test_a_stale_action_is_left_out_and_the_rest_of_its_commit_group_commits(
        tmp_path: Path, when: str) -> None:
    """Two partitions' actions in one commit group; another writer overwrites a planned file of the first
    (before the apply, or after the outputs are written): that action is stale, its output deleted through
    the gate, and the other one commits alone in one replace snapshot."""
    from compactor.runtime import faults

    t = make_table(tmp_path, "identity_int")
    project = Project.make(tmp_path, "identity_int")
    assert project.cli("plan").exit_code == 0
    first, second = project.table_plan()["actions"]
    target = first["bins"][0][0]
    if when == "before_apply":
        overwrite_file(t, target)
    previous = faults.set_hook(
        (lambda name: overwrite_file(t, target) if name == "iceberg.outputs_written" else None)
        if when == "while_rewriting" else None)
    try:
        r = project.cli("apply", str(project.plan_file))
    finally:
        faults.set_hook(previous)
    assert r.exit_code == 0, r.output
    assert [x["status"] for x in project.results()] == ["stale", "success"]
    t.refresh()
    snap = t.current_snapshot()
    assert snap is not None and snap.summary is not None and snap.summary.operation.value == "replace"
    live = {f.path for f in state_of(t, "db.identity_int").files}
    assert not {p for b in second["bins"] for p in b} & live  # the fresh action's files replaced
    assert {p for b in first["bins"] for p in b if p != target} <= live  # the stale one's untouched
    assert leftovers(t) == []


def test_a_table_with_position_deletes_is_skipped_on_the_local_engine_naming_the_spark_engine(tmp_path: Path) -> None:
    t = make_table(tmp_path, "unpartitioned")
    files = [f.path for f in state_of(t, "db.unpartitioned").files]
    commit_position_deletes(t, {p: [0] for p in files}, file_scoped=True)
    project = Project.make(tmp_path, "unpartitioned")
    r = project.cli("plan", "--detailed-exitcode")
    assert r.exit_code == 0, r.output
    table = project.table_plan()
    assert table["actions"] == []
    skip = next(s for s in table["skipped"] if s["reason"] == "iceberg_delete_files")
    assert "spark engine" in skip["message"] and skip["details"]["files"] == len(files)
    assert "spark engine" in r.output


def test_the_spark_engine_plans_without_a_jvm_the_files_the_local_engine_leaves(tmp_path: Path) -> None:
    t = make_table(tmp_path, "unpartitioned")
    files = [f.path for f in state_of(t, "db.unpartitioned").files]
    commit_position_deletes(t, {p: [0] for p in files}, file_scoped=True)
    project = Project.make(tmp_path, "unpartitioned", profiles_text=profiles(tmp_path, engine="spark"))
    r = project.cli("plan")
    assert r.exit_code == 0, r.output
    table = project.table_plan()
    assert table["engine"] == "spark" and not [s for s in table["skipped"] if s["reason"] == "iceberg_delete_files"]
    assert sorted(p for b in project.bins() for p in b) == sorted(files)
    assert "starting Spark" not in r.output  # planned from the manifests, no JVM


def test_a_missing_table_is_exit_1_with_one_line(tmp_path: Path) -> None:
    catalog(tmp_path)
    project = Project.make(tmp_path, "nope")
    r = project.cli("plan")
    assert r.exit_code == 1, r.output
    _one_line_error(r.output)
    assert "has no table db.nope" in r.output


def test_a_catalog_the_target_does_not_declare_is_an_error_at_its_line(tmp_path: Path) -> None:
    make_table(tmp_path, "unpartitioned")
    project = Project.make(tmp_path, "unpartitioned", policy_text=policy("unpartitioned", catalog="other"))
    r = project.cli("validate")
    assert r.exit_code == 1, r.output
    _one_line_error(r.output)
    assert "t.yml:5:" in r.output and "'other' is not defined" in r.output


def test_a_catalog_that_cannot_be_opened_is_exit_1_with_one_line(tmp_path: Path) -> None:
    bad = ("default:\n  target: dev\n  outputs:\n    dev:\n      engine: local\n      catalogs:\n"
           f"        cat: {{type: sql, uri: \"sqlite:///{tmp_path}/no/such/dir/catalog.db\"}}\n")
    project = Project.make(tmp_path, "t", profiles_text=bad)
    r = project.cli("plan")
    assert r.exit_code == 1, r.output
    _one_line_error(r.output)
    assert "catalog 'cat'" in r.output


def test_an_iceberg_policy_discovering_a_folder_is_refused_at_its_line(tmp_path: Path) -> None:
    """A path names one table to plan read-only (tests/iceberg/test_path_table.py); a discover over folders
    does not: an Iceberg table is found through its catalog."""
    text = ("version: 1\ntables:\n  - name: t\n    format: iceberg\n    discover: {root: /somewhere}\n"
            "    compaction: {target_file_size: 1MiB}\n")
    project = Project.make(tmp_path, "t", policy_text=text)
    r = project.cli("validate")
    assert r.exit_code == 1, r.output
    assert "t.yml:3:" in r.output and "named by a catalog" in r.output, r.output


def test_a_sql_catalog_without_uri_is_refused(tmp_path: Path) -> None:
    bad = "default:\n  target: dev\n  outputs:\n    dev:\n      engine: local\n      catalogs:\n        cat: {type: sql}\n"
    project = Project.make(tmp_path, "t", profiles_text=bad)
    r = project.cli("validate")
    assert r.exit_code != 0 and "uri" in r.output, r.output
    _one_line_error(r.output)


def test_a_delete_after_planning_is_refused_at_the_commit_and_its_outputs_discarded(tmp_path: Path) -> None:
    """The planned file is still live (the precondition holds), but a delete now applies to it: the replace
    refuses as stale right before committing, and the outputs written for it go through the deletion gate."""
    t = make_table(tmp_path, "unpartitioned")
    project = Project.make(tmp_path, "unpartitioned")
    assert project.cli("plan").exit_code == 0
    commit_position_deletes(t, {project.bins()[0][0]: [0]}, file_scoped=True)
    t.refresh()
    head, before = t.current_snapshot(), rows(t)
    r = project.cli("apply", str(project.plan_file))
    assert r.exit_code == 0, r.output
    (result,) = project.results()
    assert result["status"] == "stale" and "delete files" in result["error"], result
    t.refresh()
    assert t.current_snapshot() == head and rows(t) == before
    assert leftovers(t) == []
