"""`compactor plan` options: formats, --partitions, --detailed-exitcode, --out, --metrics, bad input."""

from __future__ import annotations

import json
from pathlib import Path

import jsonschema
from click.testing import CliRunner

from compactor.cli import cli
from compactor.policy.schema import load_schema
from compactor.tasks.plan_file import load_plan
from tests.cli.test_cli import lake_project, project


def run(*args: str):
    return CliRunner().invoke(cli, list(args), catch_exceptions=False)


def test_json_format_equals_the_written_plan_and_matches_the_schema(tmp_path: Path) -> None:
    _, p, _ = lake_project(tmp_path)
    out = tmp_path / "plan.json"
    r = run("plan", "--project-dir", str(p), "--format", "json", "--out", str(out))
    assert r.exit_code == 0, r.output
    printed = json.loads(r.output)
    jsonschema.validate(printed, load_schema("plan.schema.json"))
    written = load_plan(out)
    assert printed["totals"]["actions"] == written.totals.actions == 3
    assert not (p / "target" / "plan.json").exists()  # --out replaces the default location


def test_text_summarises_and_partitions_lists_every_partition(tmp_path: Path) -> None:
    _, p, _ = lake_project(tmp_path)
    summary = run("plan", "--project-dir", str(p))
    assert summary.exit_code == 0, summary.output
    assert "files 24 -> 3" in summary.output and "Plan:" in summary.output
    assert (p / "target" / "plan.json").is_file()
    detailed = run("plan", "--project-dir", str(p), "--partitions")
    for day in ("2024-01-01", "2024-01-02", "2024-01-03"):
        assert f"date={day}" in detailed.output


def test_skip_reasons_are_counted(tmp_path: Path) -> None:
    t, p, _ = lake_project(tmp_path)
    (p / "policies" / "p.yml").write_text(
        f"version: 1\ntables:\n  - name: t\n    path: {t}\n    compaction:\n"
        "      target_file_size: 1MiB\n      triggers: {min_input_files: 100}\n")
    r = run("plan", "--project-dir", str(p), "--detailed-exitcode")
    assert r.exit_code == 0, r.output  # no changes
    assert "below_min_input_files x3" in r.output


def test_detailed_exitcode_reports_table_errors_as_1(tmp_path: Path) -> None:
    missing = tmp_path / "nowhere"
    p = project(tmp_path / "proj", f"version: 1\ntables:\n  - name: gone\n    path: {missing}\n")
    r = run("plan", "--project-dir", str(p), "--detailed-exitcode")
    assert r.exit_code == 1
    assert "does not exist" in r.output and "Traceback" not in r.output
    md = run("plan", "--project-dir", str(p), "--format", "markdown")
    assert md.exit_code == 1 and "**error**" in md.output


def test_metrics_file_is_written(tmp_path: Path) -> None:
    _, p, _ = lake_project(tmp_path)
    prom = tmp_path / "plan.prom"
    r = run("plan", "--project-dir", str(p), "--metrics", str(prom), "--format", "markdown")
    assert r.exit_code == 0, r.output
    assert "compactor_" in prom.read_text()


def test_missing_project_is_a_usage_error(tmp_path: Path) -> None:
    r = run("plan", "--project-dir", str(tmp_path / "none"))
    assert r.exit_code == 2 and "Traceback" not in r.output
