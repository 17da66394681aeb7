"""An Iceberg table's retention through the CLI with the local engine (no JVM): `compactor plan` lists the
exact snapshots ``expire_snapshots`` expires and the exact files that frees, and the exact files
``remove_orphan_files`` deletes; `compactor apply` expires them (time travel to an expired snapshot is gone,
the current rows are the same) and deletes only those files, through the deletion gate; the next plan plans
nothing. A change after planning: a tag on a planned snapshot makes the expiry stale (nothing committed),
also when it lands between apply's check and its commit; a file committed at a planned orphan's path is
kept. A spark-engine target runs them the same way (no JVM); another format's retention key is an error at
its line."""

from __future__ import annotations

import os
import time
from pathlib import Path
from typing import Any

import pytest

pytest.importorskip("pyiceberg", reason="pyiceberg is not installed (pip install 'compactor[iceberg]')")

import pyarrow as pa  # noqa: E402
import pyarrow.parquet as pq  # noqa: E402
from pyiceberg.table import Table  # noqa: E402

from compactor.formats.iceberg import expire as expire_module  # noqa: E402
from compactor.formats.iceberg.references import referenced_paths  # noqa: E402
from compactor.formats.iceberg.state import state_of  # noqa: E402
from compactor.runtime import journal, liveness  # noqa: E402
from tests.iceberg.project import Project, profiles  # noqa: E402
from tests.iceberg.tables import append, batch, catalog, make_table, overwrite_file, rows, upgrade_to_v3  # noqa: E402

DAY = 86400


def _policy(table: str, *, expire: str = "", orphans: str = "") -> str:
    text = ("version: 1\ntables:\n  - name: t\n    format: iceberg\n"
            f"    catalog: {{name: cat, namespace: db, table: {table}}}\n"
            "    compaction: {enabled: false}\n    retention:\n      allow_unsafe_retention: true\n"
            "      min_reader_lag: 1s\n")
    if expire:
        text += f"      expire_snapshots: {{enabled: true, {expire}}}\n"
    if orphans:
        text += f"      remove_orphan_files: {{enabled: true, {orphans}}}\n"
    return text


def _local(uri: str) -> Path:
    return Path(uri.removeprefix("file://"))


def _history(tmp_path: Path) -> tuple[Table, str]:
    """Four appends, an overwrite of one of their files (its rows kept in a new file) and one more append,
    a second ago: the overwritten file is named only by the snapshots up to the overwrite."""
    t = make_table(tmp_path, "unpartitioned")
    gone = state_of(t, "db.unpartitioned").files[0].path
    overwrite_file(t, gone)
    append(t, 9)
    t.refresh()
    time.sleep(1.1)  # every snapshot is older than the policies' 1s
    return t, gone


def _action(project: Project, kind: str) -> dict[str, Any]:
    (action,) = [a for a in project.table_plan()["actions"] if a["type"] == kind]
    return action


def _without_horizon(action: dict[str, Any]) -> dict[str, Any]:
    return {**action, "params": {k: v for k, v in action["params"].items() if k != "horizon_ms"}}


def _result(project: Project, kind: str) -> dict[str, Any]:
    (result,) = [r for r in project.results() if r["type"] == kind]
    return result


def test_plan_lists_the_exact_snapshots_and_files_and_apply_expires_them_and_converges(tmp_path: Path) -> None:
    t, gone = _history(tmp_path)
    head = t.current_snapshot()
    assert head is not None
    old = sorted(s.snapshot_id for s in t.metadata.snapshots if s.snapshot_id != head.snapshot_id)
    before = rows(t)
    project = Project.make(tmp_path, "unpartitioned",
                           policy_text=_policy("unpartitioned", expire="older_than: 1s, retain_last: 1"))
    r = project.cli("plan", "--detailed-exitcode")
    assert r.exit_code == 2, r.output
    action = _action(project, "expire_snapshots")
    assert action["params"]["snapshots"] == old and action["params"]["files"] == [gone]
    assert action["precondition"]["table_version"] == head.snapshot_id
    assert action["input_files"] == 1 and action["input_bytes"] == _local(gone).stat().st_size
    first = project.table_plan()["actions"]
    assert project.cli("plan").exit_code == 0  # planned again: the same action, but for the horizon (now moved)
    assert [_without_horizon(a) for a in project.table_plan()["actions"]] == [_without_horizon(a) for a in first]

    r = project.cli("apply", str(project.plan_file))
    assert r.exit_code == 0, r.output
    result = _result(project, "expire_snapshots")
    assert result["status"] == "success", result
    assert result["details"]["snapshots"] == old and result["details"]["files"] == [gone]
    assert result["files_removed"] == 1 and result["bytes_removed"] == action["input_bytes"]
    t.refresh()
    assert [s.snapshot_id for s in t.metadata.snapshots] == [head.snapshot_id]
    with pytest.raises(ValueError, match="not found|does not exist|Cannot find"):
        t.scan(snapshot_id=old[0]).to_arrow()  # time travel to an expired snapshot is gone
    assert rows(t) == before
    assert not _local(gone).exists()
    assert all(_local(p).exists() for p in referenced_paths(t) if p.endswith(".parquet"))

    r = project.cli("plan", "--detailed-exitcode")
    assert r.exit_code == 0, r.output
    assert "iceberg_nothing_to_expire" in r.output


def test_files_a_kept_snapshot_references_survive_and_its_tag_still_reads(tmp_path: Path) -> None:
    """The snapshot before the overwrite is tagged: it is kept, and so is the file only it (and older
    snapshots) name; retain_last keeps the overwrite snapshot too."""
    t, gone = _history(tmp_path)
    snaps = list(t.metadata.snapshots)
    tagged = snaps[3]  # the last append before the overwrite: ``gone`` is live in it
    t.manage_snapshots().create_tag(tagged.snapshot_id, "audit").commit()
    t.refresh()
    at_tag = rows(t, tagged.snapshot_id)
    project = Project.make(tmp_path, "unpartitioned",
                           policy_text=_policy("unpartitioned", expire="older_than: 1s, retain_last: 2"))
    assert project.cli("plan").exit_code == 0
    action = _action(project, "expire_snapshots")
    assert action["params"]["snapshots"] == sorted(s.snapshot_id for s in snaps[:3])
    assert action["params"]["files"] == []  # every file they name is named by a kept snapshot
    r = project.cli("apply", str(project.plan_file))
    assert r.exit_code == 0, r.output
    t.refresh()
    assert sorted(s.snapshot_id for s in t.metadata.snapshots) == sorted(s.snapshot_id for s in snaps[3:])
    assert t.metadata.refs["audit"].snapshot_id == tagged.snapshot_id
    assert _local(gone).exists() and rows(t, tagged.snapshot_id) == at_tag
    assert project.cli("plan", "--detailed-exitcode").exit_code == 0


def test_a_snapshot_tagged_after_planning_makes_the_plan_stale_and_nothing_is_committed(tmp_path: Path) -> None:
    t, gone = _history(tmp_path)
    project = Project.make(tmp_path, "unpartitioned",
                           policy_text=_policy("unpartitioned", expire="older_than: 1s, retain_last: 1"))
    assert project.cli("plan").exit_code == 0
    planned = _action(project, "expire_snapshots")["params"]["snapshots"]
    t.manage_snapshots().create_tag(planned[0], "late").commit()
    t.refresh()
    before = [s.snapshot_id for s in t.metadata.snapshots]
    r = project.cli("apply", str(project.plan_file))
    assert r.exit_code == 0, r.output  # stale is no failure: the next plan takes the table as it is
    result = _result(project, "expire_snapshots")
    assert result["status"] == "stale" and "'late'" in result["error"], result
    t.refresh()
    assert [s.snapshot_id for s in t.metadata.snapshots] == before and t.metadata.refs["late"].snapshot_id == planned[0]
    assert _local(gone).exists()


def test_a_tag_made_between_the_check_and_the_commit_fails_the_commit(tmp_path: Path,
                                                                       monkeypatch: pytest.MonkeyPatch) -> None:
    """pyiceberg's expiry would drop a tag on an expired snapshot; the catalog checks compactor's requirement
    against the metadata it commits on, so the commit fails, and the check after it makes the action stale."""
    t, gone = _history(tmp_path)
    project = Project.make(tmp_path, "unpartitioned",
                           policy_text=_policy("unpartitioned", expire="older_than: 1s, retain_last: 1"))
    assert project.cli("plan").exit_code == 0
    planned = _action(project, "expire_snapshots")["params"]["snapshots"]
    commit = expire_module._Expire.commit
    raced: list[int] = []

    def racing(self: Any) -> None:
        if not raced:  # another writer tags a planned snapshot right before compactor's commit
            other = catalog(tmp_path).load_table("db.unpartitioned")
            other.manage_snapshots().create_tag(planned[-1], "racer").commit()
            raced.append(planned[-1])
        commit(self)

    monkeypatch.setattr(expire_module._Expire, "commit", racing)
    before = [s.snapshot_id for s in t.metadata.snapshots]
    r = project.cli("apply", str(project.plan_file))
    assert r.exit_code == 0, r.output
    result = _result(project, "expire_snapshots")
    assert raced and result["status"] == "stale" and "'racer'" in result["error"], result
    t.refresh()
    assert [s.snapshot_id for s in t.metadata.snapshots] == before
    assert t.metadata.refs["racer"].snapshot_id == planned[-1] and _local(gone).exists()


def _old(path: Path, data: bytes = b"x" * 16) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(data)
    past = time.time() - 30 * DAY
    os.utime(path, (past, past))
    return path


def test_remove_orphan_files_deletes_exactly_the_old_unreferenced_files(tmp_path: Path) -> None:
    t = make_table(tmp_path, "identity_int")
    root = _local(t.location())
    orphan = _old(root / "data" / "grp=0" / "00000-9-orphan.parquet")
    young = root / "data" / "orphan-young.parquet"
    young.write_bytes(b"y" * 8)
    left = [_old(root / "metadata" / "snap-orphan.avro"), _old(root / "_compactor" / "journal" / "old.tmp"),
            _old(root / "data" / ".00000-9-orphan.parquet.crc"), _old(root / "data" / "_temporary" / "0" / "x.parquet")]
    before = rows(t)
    project = Project.make(tmp_path, "identity_int", policy_text=_policy("identity_int", orphans="older_than: 1d"))
    r = project.cli("plan", "--detailed-exitcode")
    assert r.exit_code == 2, r.output
    action = _action(project, "remove_orphan_files")
    assert action["params"]["files"] == [str(orphan)] and action["input_bytes"] == 16

    r = project.cli("apply", str(project.plan_file))
    assert r.exit_code == 0, r.output
    result = _result(project, "remove_orphan_files")
    assert result["status"] == "success" and result["files_removed"] == 1 and result["bytes_removed"] == 16
    assert not orphan.exists() and young.exists() and all(p.exists() for p in left)
    t.refresh()
    assert rows(t) == before and all(_local(p).exists() for p in referenced_paths(t))
    r = project.cli("plan", "--detailed-exitcode")
    assert r.exit_code == 0, r.output
    assert "iceberg_no_orphan_files" in r.output


def test_a_file_committed_after_planning_at_a_planned_orphan_path_is_kept(tmp_path: Path) -> None:
    t = make_table(tmp_path, "unpartitioned")
    root = _local(t.location())
    data = batch(t, 50)
    plain = pa.schema([pa.field(f.name, f.type, f.nullable) for f in data.schema])  # no field ids: add_files
    orphan = root / "data" / "late-commit.parquet"
    pq.write_table(data.cast(plain), orphan)
    past = time.time() - 30 * DAY
    os.utime(orphan, (past, past))
    project = Project.make(tmp_path, "unpartitioned", policy_text=_policy("unpartitioned", orphans="older_than: 1d"))
    assert project.cli("plan").exit_code == 0
    assert _action(project, "remove_orphan_files")["params"]["files"] == [str(orphan)]
    t.add_files([orphan.as_uri()])  # another writer commits the file the plan lists
    t.refresh()
    before = rows(t)
    r = project.cli("apply", str(project.plan_file))
    assert r.exit_code == 0, r.output
    result = _result(project, "remove_orphan_files")
    assert result["status"] == "success" and result["files_removed"] == 0, result
    assert result["details"]["kept"] == {str(orphan): "a snapshot in the table's metadata references it"}
    assert orphan.exists() and rows(t) == before and len(before) > 0


def test_a_file_a_running_compactor_names_in_its_journal_is_no_orphan(tmp_path: Path) -> None:
    t = make_table(tmp_path, "unpartitioned")
    root = _local(t.location())
    named = _old(root / "data" / "00000-7-being-written.parquet")
    alive = liveness.identity_of(os.getppid())  # another process, still running
    journal.adopt(str(root), journal.JournalEntry("run", "other:t:0", str(root), None,
                                                  outputs=["data/00000-7-being-written.parquet"], identity=alive))
    project = Project.make(tmp_path, "unpartitioned", policy_text=_policy("unpartitioned", orphans="older_than: 1d"))
    r = project.cli("plan", "--detailed-exitcode")
    assert r.exit_code == 0, r.output
    assert project.table_plan()["actions"] == [] and named.exists()


def test_a_spark_engine_target_plans_and_runs_retention_through_pyiceberg(tmp_path: Path) -> None:
    """Retention edits metadata and deletes files: a target whose engine is spark plans and runs it as the
    local engine does, through pyiceberg, starting no JVM."""
    t, gone = _history(tmp_path)
    head = t.current_snapshot()
    assert head is not None
    project = Project.make(tmp_path, "unpartitioned", profiles_text=profiles(tmp_path, engine="spark"),
                           policy_text=_policy("unpartitioned", expire="older_than: 1s, retain_last: 1"))
    r = project.cli("plan", "--detailed-exitcode")
    assert r.exit_code == 2, r.output
    assert project.table_plan()["engine"] == "spark"
    assert [a["type"] for a in project.table_plan()["actions"]] == ["expire_snapshots"]
    r = project.cli("apply", str(project.plan_file))
    assert r.exit_code == 0, r.output
    assert "starting Spark" not in r.output
    assert _result(project, "expire_snapshots")["status"] == "success"
    t.refresh()
    assert [s.snapshot_id for s in t.metadata.snapshots] == [head.snapshot_id]
    assert not _local(gone).exists()


def test_another_formats_retention_key_is_an_error_at_its_line(tmp_path: Path) -> None:
    make_table(tmp_path, "unpartitioned")
    text = _policy("unpartitioned", expire="older_than: 7d") + "      vacuum: {enabled: true}\n"
    project = Project.make(tmp_path, "unpartitioned", policy_text=text)
    r = project.cli("validate")
    assert r.exit_code == 1, r.output
    assert "t.yml:11:15" in r.output and "retention_key_format" in r.output, r.output
    assert "retention.vacuum is a setting of delta tables: it does not apply to iceberg tables" in r.output


def test_a_format_version_3_table_is_not_expired_naming_why(tmp_path: Path) -> None:
    """pyiceberg 0.12 cannot write v3 metadata: the plan skips the expiry instead of failing at apply."""
    t, _ = _history(tmp_path)
    upgrade_to_v3(tmp_path, t)
    project = Project.make(tmp_path, "unpartitioned_v3",
                           policy_text=_policy("unpartitioned_v3", expire="older_than: 1s, retain_last: 1"))
    r = project.cli("plan", "--detailed-exitcode")
    assert r.exit_code == 0, r.output
    (skip,) = [s for s in project.table_plan()["skipped"] if s["reason"] == "unsupported"]
    assert "format-version 3" in skip["message"] and "does not expire" in skip["message"]


def test_a_location_that_also_holds_another_formats_log_plans_no_orphan_removal(tmp_path: Path) -> None:
    """A Delta log beside the Iceberg metadata (a UniForm table): Delta's files are not Iceberg's to judge."""
    t = make_table(tmp_path, "unpartitioned")
    root = _local(t.location())
    _old(root / "_delta_log" / "00000000000000000000.json")
    orphan = _old(root / "data" / "delta-only.parquet")
    project = Project.make(tmp_path, "unpartitioned", policy_text=_policy("unpartitioned", orphans="older_than: 1d"))
    r = project.cli("plan", "--detailed-exitcode")
    assert r.exit_code == 0, r.output
    (skip,) = [s for s in project.table_plan()["skipped"] if s["reason"] == "unsupported"]
    assert "_delta_log" in skip["message"] and orphan.exists()


def test_a_rollback_after_planning_that_brings_a_planned_snapshot_into_the_kept_history_makes_it_stale(
        tmp_path: Path) -> None:
    """retain_last counts the current history: rolled back to the overwrite, the append before it is among
    the newest two again, so the plan that expires it is stale and nothing is committed."""
    t, gone = _history(tmp_path)
    snaps = [s.snapshot_id for s in t.metadata.snapshots]
    project = Project.make(tmp_path, "unpartitioned",
                           policy_text=_policy("unpartitioned", expire="older_than: 1s, retain_last: 2"))
    assert project.cli("plan").exit_code == 0
    assert _action(project, "expire_snapshots")["params"]["snapshots"] == sorted(snaps[:4])
    t.manage_snapshots().set_current_snapshot(snapshot_id=snaps[4]).commit()
    t.refresh()
    r = project.cli("apply", str(project.plan_file))
    assert r.exit_code == 0, r.output
    result = _result(project, "expire_snapshots")
    assert result["status"] == "stale" and f"[{snaps[3]}] may no longer expire" in result["error"], result
    t.refresh()
    assert [s.snapshot_id for s in t.metadata.snapshots] == snaps and _local(gone).exists()
