"""Planning Iceberg's own maintenance (formats/iceberg/maintenance_plan.py) on pyiceberg-written tables, no
JVM: ``compaction.position_deletes`` plans one ``rewrite_position_deletes`` per partition holding at least
``min_input_files`` position delete files that the rewrite would make fewer (listing every one of them),
``compaction.manifests`` one ``rewrite_manifests`` per spec with at least ``min_count`` data manifests
(listing the manifests Iceberg rewrites for it); below the thresholds, on the local engine and on a v3 table
the plan says why in a skip. The keys are Iceberg's: on a Delta table they are a policy error at their line."""

from __future__ import annotations

import datetime as dt
from pathlib import Path

import pytest

pytest.importorskip("pyiceberg", reason="pyiceberg is not installed (pip install 'compactor[iceberg]')")

from pyiceberg.table import Table  # noqa: E402

from compactor.formats.iceberg.maintenance_actions import (  # noqa: E402
    IcebergMaintenanceSkip,
    RewriteManifestsAction,
    RewritePositionDeletesAction,
)
from compactor.formats.iceberg.plan import plan_iceberg_table  # noqa: E402
from compactor.formats.iceberg.read import as_table_state  # noqa: E402
from compactor.formats.iceberg.state import state_of  # noqa: E402
from compactor.planning.integrity import action_problems  # noqa: E402
from compactor.planning.plan import Skip, TablePlan  # noqa: E402
from compactor.policy.model import Compaction, Manifests, PositionDeletes, TablePolicy  # noqa: E402
from tests.iceberg.project import Project  # noqa: E402
from tests.iceberg.tables import commit_position_deletes, make_table, upgrade_to_v3  # noqa: E402

NOW = dt.datetime(2030, 1, 1, tzinfo=dt.UTC)


def _policy(*, deletes: int | None = None, manifests: int | None = None) -> TablePolicy:
    c = Compaction(enabled=False,
                   position_deletes=PositionDeletes(enabled=deletes is not None, min_input_files=deletes or 5),
                   manifests=Manifests(enabled=manifests is not None, min_count=manifests or 100))
    return TablePolicy(name="t", format="iceberg", compaction=c)


def _plan(table: Table, policy: TablePolicy, engine: str = "spark") -> TablePlan:
    table.refresh()
    return plan_iceberg_table(policy, as_table_state(state_of(table, "db.t"), table), now=NOW, engine=engine)


def _own(plan: TablePlan) -> list[Skip]:
    """The plan's skips but the one saying data-file compaction is off (the policies here turn it off)."""
    return [s for s in plan.skipped if s.reason != "disabled"]


def _deleted(tmp_path: Path, granularity: str | None = "partition") -> tuple[Table, list[str], list[str]]:
    """An identity-partitioned table (grp 0 and 1, four data files each) with three partition-scoped position
    delete files in grp=0 and one in grp=1."""
    t = make_table(tmp_path, "identity_int", "t")
    if granularity is not None:
        with t.transaction() as tx:
            tx.set_properties({"write.delete.granularity": granularity})
    files = {g: [f.path for f in state_of(t, "db.t").files if f.partition[0].value == g] for g in (0, 1)}
    grp0 = [commit_position_deletes(t, {files[0][i]: [0], files[0][i + 1]: [1]})[0] for i in range(3)]
    grp1 = commit_position_deletes(t, {files[1][0]: [2]})
    return t, grp0, grp1


def test_position_deletes_plan_lists_every_delete_file_of_the_partitions_at_the_threshold(tmp_path: Path) -> None:
    t, grp0, _ = _deleted(tmp_path)
    plan = _plan(t, _policy(deletes=3))
    (a,) = plan.actions
    assert isinstance(a, RewritePositionDeletesAction)
    assert a.files == tuple(sorted(grp0)) and a.partition == {"grp": "0"} and a.spec_id == 0
    assert a.input_files == 3 and a.expected_output_files == 1 and a.dangling == 0
    assert a.precondition.table_version == t.metadata.current_snapshot_id
    policy = _policy(deletes=3)
    assert action_problems(a, policy, plan) == []
    assert action_problems(a, _policy(deletes=2), plan) == ["min_input_files 3 is not the policy's 2"]
    assert "the policy does not enable compaction.position_deletes" in action_problems(a, _policy(), plan)
    # one more than any partition holds: nothing, and the skip says so
    plan = _plan(t, _policy(deletes=4))
    assert not plan.actions
    (skip,) = _own(plan)
    assert skip.reason == IcebergMaintenanceSkip.FEW_DELETE_FILES and skip.details["most_files"] == 3


def test_file_granularity_plans_no_rewrite_that_would_not_shrink_the_delete_files(tmp_path: Path) -> None:
    """Iceberg's default granularity writes one delete file per data file: three delete files over four data
    files would come back as four, so nothing is planned (and a table converges)."""
    t, _, _ = _deleted(tmp_path, granularity=None)
    plan = _plan(t, _policy(deletes=3))
    assert not plan.actions
    (skip,) = _own(plan)
    assert skip.reason == IcebergMaintenanceSkip.FEW_DELETE_FILES and skip.details["no_reduction"] == 1


def test_manifests_plan_lists_the_specs_manifests_iceberg_rewrites(tmp_path: Path) -> None:
    t, _, _ = _deleted(tmp_path)
    snapshot = t.current_snapshot()
    assert snapshot is not None
    listed = snapshot.manifests(t.io)
    data = sorted(m.manifest_path for m in listed if m.content.name == "DATA")
    deletes = sorted(m.manifest_path for m in listed if m.content.name == "DELETES")
    assert len(data) >= 4 and len(deletes) == 4  # four appends; four delete commits
    plan = _plan(t, _policy(manifests=len(data)))
    (a,) = plan.actions
    assert isinstance(a, RewriteManifestsAction)
    assert a.files == tuple(sorted(data + deletes)) and a.spec_id == 0 and a.min_count == len(data)
    assert a.entries == 8 + 4 and a.expected_output_files == 2  # one data and one delete manifest
    assert action_problems(a, _policy(manifests=len(data)), plan) == []
    plan = _plan(t, _policy(manifests=len(data) + 1))
    assert not plan.actions
    assert [s.reason for s in _own(plan)] == [IcebergMaintenanceSkip.FEW_MANIFESTS]


def test_the_local_engine_plans_neither_and_says_the_spark_engine_does(tmp_path: Path) -> None:
    t, _, _ = _deleted(tmp_path)
    plan = _plan(t, _policy(deletes=2, manifests=2), engine="local")
    assert not plan.actions
    (skip,) = _own(plan)
    assert skip.reason == IcebergMaintenanceSkip.NEEDS_SPARK and "spark engine" in skip.message


def test_a_format_version_3_table_plans_no_position_delete_rewrite(tmp_path: Path) -> None:
    t, _, _ = _deleted(tmp_path)
    v3 = upgrade_to_v3(tmp_path, t)
    plan = plan_iceberg_table(_policy(deletes=2), as_table_state(state_of(v3, "db.t_v3"), v3), now=NOW,
                              engine="spark")
    assert not plan.actions
    assert [s.reason for s in _own(plan)] == ["unsupported"] and "format-version 3" in _own(plan)[0].message


def test_the_cli_plan_names_the_skip_and_the_keys_are_an_error_on_a_delta_table(tmp_path: Path) -> None:
    _deleted(tmp_path)
    text = ("version: 1\ntables:\n  - name: t\n    format: iceberg\n    catalog: {name: cat, namespace: db, table: t}\n"
            "    compaction:\n      enabled: false\n      position_deletes: {enabled: true, min_input_files: 2}\n"
            "      manifests: {enabled: true, min_count: 2}\n")
    project = Project.make(tmp_path, "t", policy_text=text)
    r = project.cli("plan")
    assert r.exit_code == 0, r.output
    (skip,) = [s for s in project.table_plan()["skipped"] if s["reason"] != "disabled"]
    assert skip["reason"] == "iceberg_maintenance_needs_spark", skip
    assert "the spark engine runs Iceberg's own actions" in r.output, r.output
    r = project.cli("ls")
    assert r.exit_code == 0 and "rewrite_manifests, rewrite_position_deletes" in r.output, r.output
    delta = ("version: 1\ntables:\n  - name: d\n    path: ./d\n    compaction:\n"
             "      position_deletes: {enabled: true}\n")
    (project.root / "policies" / "t.yml").write_text(delta)
    r = project.cli("validate")
    assert r.exit_code == 1, r.output
    assert "t.yml:6:25" in r.output and "compaction_key_format" in r.output, r.output
    assert "compaction.position_deletes is a setting of iceberg tables: it does not apply to delta tables" in r.output


def test_apply_refuses_an_action_whose_files_were_edited(tmp_path: Path) -> None:
    """Manifests lie in the metadata folder, so the plan's metadata-path check does not judge them: apply
    does, against the planned snapshot (maintenance_run._edited); a position delete action must list every
    position delete file of one partition."""
    from dataclasses import replace

    from compactor.formats.iceberg.maintenance_run import _edited

    t, grp0, grp1 = _deleted(tmp_path)
    plan = _plan(t, _policy(deletes=3, manifests=2))
    manifests, deletes = plan.actions
    assert isinstance(manifests, RewriteManifestsAction) and isinstance(deletes, RewritePositionDeletesAction)
    planned = state_of(t, "db.t")
    assert _edited(manifests, planned) is None and _edited(deletes, planned) is None
    metadata = t.metadata_location
    for edited in (replace(manifests, files=(*manifests.files[:-1], metadata)), replace(manifests, files=manifests.files[1:]),
                   replace(deletes, files=deletes.files[1:]), replace(deletes, files=(*deletes.files[:-1], *grp1)),
                   replace(deletes, files=(*deletes.files[:-1], metadata))):
        assert _edited(edited, planned) is not None, edited.files
