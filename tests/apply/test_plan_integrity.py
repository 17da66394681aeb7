"""`compactor apply PLAN` refuses a plan that is not what `compactor plan` wrote for this project: exit 2, a
clear message, and not a byte changed anywhere (no lease, journal or `_compactor/` folder, no results)."""

from __future__ import annotations

import hashlib
import json
from collections.abc import Callable
from pathlib import Path

import pytest
from click.testing import CliRunner

from compactor.cli import cli
from compactor.planning.plan import plan_digest
from tests.apply.helpers import make_table, one_table_project

RETENTION = "{deleted_file_retention: 8d, vacuum: {enabled: true}}"


def _tree_hash(root: Path, skip: Path) -> str:
    h = hashlib.sha256()
    for f in sorted(p for p in root.rglob("*") if p != skip):
        h.update(str(f.relative_to(root)).encode())
        if f.is_file():
            h.update(f.read_bytes())
    return h.hexdigest()


def _setup(tmp_path: Path) -> tuple[Path, Path, Path]:
    t = tmp_path / "lake" / "t"
    make_table(t, partitions=2, appends=4)
    p = one_table_project(tmp_path / "proj", t)
    (p / "policies" / "t.yml").write_text((p / "policies" / "t.yml").read_text() + f"    retention: {RETENTION}\n")
    r = CliRunner().invoke(cli, ["plan", "--project-dir", str(p)], catch_exceptions=False)
    assert r.exit_code == 0, r.output
    return t, p, p / "target" / "plan.json"


def _resign(doc: dict) -> dict:
    """What a deliberate editor does: recompute the plan's own digest after editing it."""
    doc.pop("digest", None)
    doc["digest"] = plan_digest(doc)
    return doc


def _compact(doc: dict) -> dict:
    return next(a for a in doc["tables"][0]["actions"] if a["type"] == "compact")


def _edit_partition(doc: dict) -> dict:
    _compact(doc)["partition"] = {"date": "2024-01-02"}
    return doc  # digest not recomputed


def _cut_bins(doc: dict) -> dict:
    a = _compact(doc)
    a["bins"] = [a["bins"][0][:2]]
    a["input_files"] = 2
    return _resign(doc)


def _other_project(doc: dict) -> dict:
    doc["project"] = "someone-elses-lake"
    return _resign(doc)


def _vacuum_zero(doc: dict) -> dict:
    next(a for a in doc["tables"][0]["actions"] if a["type"] == "vacuum")["params"]["retention_hours"] = 0
    return _resign(doc)


def _bigger_target(doc: dict) -> dict:
    _compact(doc)["params"]["target_file_size"] = 2 << 30
    return _resign(doc)


def _other_path(doc: dict) -> dict:
    doc["tables"][0]["path"] = str(Path(doc["tables"][0]["path"]).parent / "elsewhere")
    return _resign(doc)


def _other_table(doc: dict) -> dict:
    doc["tables"][0]["name"] = "not_in_the_project"
    return _resign(doc)


def _negative_size(doc: dict) -> dict:
    _compact(doc)["input_bytes"] = -5
    return _resign(doc)


def _digest_removed(doc: dict) -> dict:
    doc.pop("digest")
    return doc


def _empty_precondition_digest(doc: dict) -> dict:
    _compact(doc)["precondition"]["digest"] = ""
    return _resign(doc)


def _split_sharing_a_file(doc: dict) -> dict:
    """finding 5: one action split into two that share a file, the plan digest recomputed (a plain sha256)."""
    a = _compact(doc)
    b = json.loads(json.dumps(a))
    from compactor.planning.actions import digest_paths

    b["bins"] = [a["bins"][0][:2]]
    b["input_files"] = 2
    b["expected_output_files"] = 1
    b["precondition"]["digest"] = digest_paths(b["bins"][0])
    doc["tables"][0]["actions"].insert(0, b)
    return _resign(doc)


def _log_file_as_input(doc: dict) -> dict:
    a = _compact(doc)
    a["bins"][0][0] = "_delta_log/00000000000000000000.json"
    from compactor.planning.actions import digest_paths

    a["precondition"]["digest"] = digest_paths([p for b in a["bins"] for p in b])
    return _resign(doc)


def _outside_the_table(doc: dict) -> dict:
    a = _compact(doc)
    a["bins"][0][0] = "date=2024-01-01/../../outside.parquet"
    from compactor.planning.actions import digest_paths

    a["precondition"]["digest"] = digest_paths([p for b in a["bins"] for p in b])
    return _resign(doc)


TAMPERINGS: dict[str, tuple[Callable[[dict], dict], str]] = {
    "finding_5_digest_removed": (_digest_removed, "has no digest"),
    "finding_5_empty_precondition_digest": (_empty_precondition_digest, "no precondition digest"),
    "finding_5_split_action_sharing_a_file": (_split_sharing_a_file, "a file may be in one action only"),
    "log_file_as_input": (_log_file_as_input, "no action may touch"),
    "outside_the_table": (_outside_the_table, "not a normalised path"),
    "edited_partition": (_edit_partition, "modified after `compactor plan`"),
    "cut_down_bins": (_cut_bins, "precondition digest"),
    "other_project": (_other_project, "someone-elses-lake"),
    "vacuum_retention_0": (_vacuum_zero, "retention_hours 0"),
    "target_size": (_bigger_target, "target_file_size"),
    "table_path": (_other_path, "is not the policy's path"),
    "table_set": (_other_table, "not declared by this project"),
    "negative_size": (_negative_size, "plan.schema.json"),
}


@pytest.mark.parametrize("name", TAMPERINGS)
def test_a_tampered_plan_is_refused_and_nothing_changes(tmp_path: Path, name: str) -> None:
    t, p, plan_file = _setup(tmp_path)
    tamper, message = TAMPERINGS[name]
    plan_file.write_text(json.dumps(tamper(json.loads(plan_file.read_text()))))
    before = _tree_hash(tmp_path, plan_file)
    r = CliRunner().invoke(cli, ["apply", str(plan_file), "--project-dir", str(p)], catch_exceptions=False)
    assert r.exit_code == 2, r.output
    assert message in r.output, r.output
    assert "Traceback" not in r.output
    assert _tree_hash(tmp_path, plan_file) == before
    assert not (t / "_compactor").exists() and not (t.parent / "elsewhere").exists()


def test_the_untouched_plan_applies(tmp_path: Path) -> None:
    t, p, plan_file = _setup(tmp_path)
    r = CliRunner().invoke(cli, ["apply", str(plan_file), "--project-dir", str(p)], catch_exceptions=False)
    assert r.exit_code == 0, r.output


def test_dry_run_evaluates_later_actions_as_if_earlier_ones_ran(tmp_path: Path) -> None:
    """set_properties lowers the table's retention, then vacuum uses it: the dry run succeeds and writes
    nothing anywhere."""
    t = tmp_path / "lake" / "t"
    make_table(t, partitions=1, appends=3)
    p = one_table_project(tmp_path / "proj", t)
    (p / "policies" / "t.yml").write_text(
        (p / "policies" / "t.yml").read_text()
        + "    retention: {deleted_file_retention: 2d, allow_unsafe_retention: true, min_reader_lag: 1d, vacuum: {enabled: true}}\n")
    r = CliRunner().invoke(cli, ["plan", "--project-dir", str(p), "--format", "json"], catch_exceptions=False)
    types = [a["type"] for a in json.loads(r.output)["tables"][0]["actions"]]
    assert types == ["compact", "set_properties", "vacuum"], r.output
    plan_file = p / "target" / "plan.json"
    before = _tree_hash(tmp_path, plan_file)
    r = CliRunner().invoke(cli, ["apply", str(plan_file), "--project-dir", str(p), "--dry-run"],
                           catch_exceptions=False)
    assert r.exit_code == 0, r.output
    assert _tree_hash(tmp_path, plan_file) == before
