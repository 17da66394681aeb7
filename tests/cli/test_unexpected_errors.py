"""Inputs that used to escape as "Internal error" or a traceback: each is a clear message and exit 2
(or, for --out into a new folder, simply works, as `terraform plan -out` and dbt's target path do)."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from tests.apply.helpers import exactly_once
from tests.cli.test_cli import cli, lake_project


def _no_traceback(r) -> None:
    assert "Traceback" not in r.stdout + r.stderr and "Internal error" not in r.stderr, r.stderr


def test_plan_out_creates_missing_folders(tmp_path: Path) -> None:
    _, p, _ = lake_project(tmp_path)
    out = tmp_path / "plans" / "2024" / "nightly.json"
    metrics = tmp_path / "metrics" / "plan.prom"
    r = cli("plan", "--project-dir", str(p), "--out", str(out), "--metrics", str(metrics))
    assert r.returncode == 0, r.stdout + r.stderr
    assert json.loads(out.read_text())["schema_version"] == 2 and metrics.is_file()
    report = tmp_path / "reports" / "lake.html"
    assert cli("report", "--project-dir", str(p), "--plan", str(out), "--out", str(report)).returncode == 0
    assert report.is_file()


def test_plan_out_that_cannot_be_created_is_a_usage_error(tmp_path: Path) -> None:
    _, p, _ = lake_project(tmp_path)
    blocker = tmp_path / "file.txt"
    blocker.write_text("not a folder")
    r = cli("plan", "--project-dir", str(p), "--out", str(blocker / "plan.json"))
    assert r.returncode == 2
    assert r.stderr.startswith(f"Error: cannot create the folder for --out {blocker / 'plan.json'}: "), r.stderr
    _no_traceback(r)
    r = cli("plan", "--project-dir", str(p), "--out", str(tmp_path))  # click's own check
    assert r.returncode == 2 and "is a directory" in r.stderr
    _no_traceback(r)


def test_default_plan_path_that_is_a_folder_is_a_usage_error(tmp_path: Path) -> None:
    _, p, _ = lake_project(tmp_path)
    (p / "target" / "plan.json").mkdir(parents=True)
    r = cli("plan", "--project-dir", str(p))
    assert r.returncode == 2
    assert r.stderr.startswith(f"Error: --out {p / 'target' / 'plan.json'} is a folder; give a file name\n"), r.stderr
    _no_traceback(r)


@pytest.mark.parametrize("command", ["apply", "report"])
def test_deeply_nested_plan_json_is_a_plan_error(tmp_path: Path, command: str) -> None:
    _, p, _ = lake_project(tmp_path)
    deep = tmp_path / "deep.json"
    deep.write_text("[" * 100_000 + "]" * 100_000)
    args = [str(deep)] if command == "apply" else ["--plan", str(deep)]
    r = cli(command, *args, "--project-dir", str(p))
    assert r.returncode == 2
    assert f"Error: plan file {deep} is nested too deeply to be a compactor plan\n" == r.stderr
    _no_traceback(r)


def test_plan_nested_below_the_json_limit_is_a_plan_error_too(tmp_path: Path) -> None:
    _, p, _ = lake_project(tmp_path)
    deep = tmp_path / "deep.json"
    deep.write_text('{"schema_version": 1, "tables": ' + "[" * 900 + "]" * 900 + "}")
    r = cli("apply", str(deep), "--project-dir", str(p))
    assert r.returncode == 2 and r.stderr.startswith("Error: plan file "), r.stderr
    _no_traceback(r)


def _edit(plan: dict, where: str, value) -> dict:
    node: dict = plan
    *path, last = where.split(".")
    for key in path:
        node = node[int(key)] if isinstance(node, list) else node[key]
    node[last] = value
    return plan


@pytest.mark.parametrize("where", [
    "tables.0.actions.0.params.target_file_size",
    "tables.0.actions.0.params.min_file_size",
    "tables.0.actions.0.input_bytes",
    "tables.0.actions.0.expected_output_bytes",
    "tables.0.actions.0.rows",
    "tables.0.bytes_before",
    "tables.0.files_after",
    "totals.bytes_to_rewrite",
])
def test_negative_size_in_a_plan_is_refused_before_anything_runs(tmp_path: Path, where: str) -> None:
    t, p, n = lake_project(tmp_path)
    assert cli("plan", "--project-dir", str(p)).returncode == 0
    plan = json.loads((p / "target" / "plan.json").read_text())
    bad = tmp_path / "bad.json"
    bad.write_text(json.dumps(_edit(plan, where, -5)))
    r = cli("apply", str(bad), "--project-dir", str(p))
    assert r.returncode == 2, r.stdout + r.stderr
    assert r.stderr.startswith(f"Error: plan file does not match plan.schema.json at {where.replace('.', '/')}: "
                               "-5 is less than the minimum of "), r.stderr
    _no_traceback(r)
    exactly_once(t, n)  # nothing was applied
    assert not (p / "target" / "run_results.json").exists()


def test_an_action_failing_unexpectedly_logs_no_traceback_without_debug(tmp_path: Path) -> None:
    t, p, n = lake_project(tmp_path)
    assert cli("plan", "--project-dir", str(p)).returncode == 0
    plan_file = p / "target" / "plan.json"
    # a bug compactor has not met yet: the commit path raising something that is not a CompactorError
    # (injected in the CLI's own process; the table and engine are real)
    boom = ("import sys, compactor.formats.delta.apply.rewrite as run\n"
            "def boom(*a, **k):\n    raise RuntimeError('injected: no_such_column')\n"
            "run.commit_swap = boom\n"
            "from compactor.cli import main\nsys.argv = ['compactor'] + sys.argv[1:]\nmain()\n")
    args = ["apply", str(plan_file), "--project-dir", str(p), "--fail-fast"]
    r = subprocess.run([sys.executable, "-c", boom, *args], capture_output=True, text=True)
    assert r.returncode == 1, r.stdout + r.stderr
    assert "action failed" in r.stderr and "no_such_column" in r.stdout + r.stderr
    _no_traceback(r)
    debug = subprocess.run([sys.executable, "-c", boom, *args, "--debug"], capture_output=True, text=True)
    assert "Traceback" in debug.stderr
    exactly_once(t, n)


def test_a_torn_input_file_is_named(tmp_path: Path) -> None:
    t, p, n = lake_project(tmp_path)
    assert cli("plan", "--project-dir", str(p)).returncode == 0
    plan_file = p / "target" / "plan.json"
    victim = t / json.loads(plan_file.read_text())["tables"][0]["actions"][0]["bins"][0][0]
    good = victim.read_bytes()
    victim.write_bytes(good[: len(good) // 2])
    r = cli("apply", str(plan_file), "--project-dir", str(p), "--fail-fast")
    # named by the progress, not again by the summary (issue 37 item 3: each line once)
    assert r.returncode == 1 and victim.name in r.stderr and victim.name not in r.stdout, r.stdout + r.stderr
    _no_traceback(r)
    victim.write_bytes(good)
    exactly_once(t, n)
