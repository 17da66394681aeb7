"""CLI behaviour: exit codes 0/1/2, the error line format, no tracebacks, and the main commands."""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import jsonschema

from compactor.policy.schema import load_schema
from tests.apply.helpers import exactly_once, make_table

REPO = Path(__file__).resolve().parents[2]


def cli(*args: str, cwd: Path | None = None, input: str | None = None) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "compactor", *args], cwd=cwd, capture_output=True, text=True,
                          input=input, env={**os.environ, "COLUMNS": "160"})


def project(tmp: Path, policy: str, profiles: str | None = None) -> Path:
    (tmp / "policies").mkdir(parents=True, exist_ok=True)
    (tmp / "compactor.yml").write_text("name: p\n")
    (tmp / "policies" / "p.yml").write_text(policy)
    if profiles:
        (tmp / "profiles.yml").write_text(profiles)
    return tmp


def lake_project(tmp_path: Path) -> tuple[Path, Path, int]:
    """A small-file Delta table and a project with one policy for it: (table, project, rows)."""
    t = tmp_path / "lake" / "t"
    n = make_table(t)
    p = project(tmp_path / "proj", f"version: 1\ntables:\n  - name: t\n    path: {t}\n    compaction:\n"
                                   "      target_file_size: 1MiB\n      triggers: {min_input_files: 2}\n")
    return t, p, n


def test_validate_example_project_imports_no_engine() -> None:
    """validate stays light (its speed is a benchmark's business, not a timed test's)."""
    r = cli("validate", "--project-dir", str(REPO / "policies"))
    assert r.returncode == 0, r.stdout + r.stderr
    assert "OK:" in r.stdout
    probe = subprocess.run([sys.executable, "-c", (
        "import sys; from compactor.cli import cli\n"
        "try:\n  cli(['validate','--project-dir',%r])\nexcept SystemExit: pass\n"
        "print('MODULES:' + ','.join(m for m in ('pyspark','deltalake','pyarrow') if m in sys.modules))") % str(REPO / "policies")],
        capture_output=True, text=True)
    assert probe.stdout.strip().splitlines()[-1] == "MODULES:", probe.stdout


def test_validate_reports_every_error_with_position(tmp_path: Path) -> None:
    p = project(tmp_path, "version: 1\ntables:\n  - name: a\n    path: /x\n    compaction:\n"
                          "      target_file_sise: 1GB\n  - name: b\n    path: /y\n    compaction:\n"
                          "      strategy: z_order\n")
    r = cli("validate", "--project-dir", str(p))
    assert r.returncode == 1
    lines = [ln for ln in r.stdout.splitlines() if re.match(r"^policies/p\.yml:\d+:\d+: \w+ ", ln)]
    assert len(lines) == 2
    assert lines[0].startswith("policies/p.yml:6:7: unknown_key unknown key 'target_file_sise'")
    assert "did you mean 'target_file_size'" in lines[0]
    assert lines[1].startswith("policies/p.yml:10:") and "missing_z_order_by" in lines[1]
    assert "Traceback" not in r.stdout + r.stderr


def test_validate_formats(tmp_path: Path) -> None:
    p = project(tmp_path, "version: 1\ntables:\n  - name: a\n    path: /x\n    enabled: maybe\n")
    gh = cli("validate", "--project-dir", str(p), "--format", "github")
    assert gh.returncode == 1
    assert gh.stdout.startswith("::error file=policies/p.yml,line=5,col=14,title=wrong_type::")
    js = cli("validate", "--project-dir", str(p), "--format", "json")
    data = json.loads(js.stdout)
    assert data["ok"] is False and data["diagnostics"][0]["json_path"] == "tables[0].enabled"


def test_usage_errors_exit_2_without_traceback(tmp_path: Path) -> None:
    r = cli("validate", "--project-dir", str(tmp_path / "missing"))
    assert r.returncode == 2 and "no compactor.yml" in r.stderr and "Traceback" not in r.stderr
    p = project(tmp_path / "p", "version: 1\ntables: []\n")
    r = cli("validate", "--project-dir", str(p), "--vars", "[1, 2")
    assert r.returncode == 2 and "--vars" in r.stderr
    r = cli("plan", "--project-dir", str(p), "--target", "prod")
    assert r.returncode == 2 and "target 'prod'" in r.stderr
    r = cli("apply", str(tmp_path / "nope.json"), "--project-dir", str(p))
    assert r.returncode == 2 and "plan file not found" in r.stderr
    (tmp_path / "bad.json").write_text("{not json")
    r = cli("apply", str(tmp_path / "bad.json"), "--project-dir", str(p))
    assert r.returncode == 2 and "not valid JSON" in r.stderr and "Traceback" not in r.stderr


def test_init_scaffolds_a_valid_project(tmp_path: Path) -> None:
    r = cli("init", str(tmp_path / "new"))
    assert r.returncode == 0, r.stderr
    assert cli("validate", "--project-dir", str(tmp_path / "new")).returncode == 0
    again = cli("init", str(tmp_path / "new"))
    assert again.returncode == 2 and "refusing to overwrite" in again.stderr


def test_plan_then_apply_the_plan_file(tmp_path: Path) -> None:
    t, p, n = lake_project(tmp_path)
    r = cli("plan", "--project-dir", str(p), "--detailed-exitcode")
    assert r.returncode == 2, r.stdout + r.stderr  # changes present
    assert "24 -> 3" in r.stdout.replace(" ", "").replace("->", " -> ") or "files 24 -> 3" in r.stdout
    plan_file = tmp_path / "reviewed-plan.json"
    shutil.copy(p / "target" / "plan.json", plan_file)
    jsonschema.validate(json.loads(plan_file.read_text()), load_schema("plan.schema.json"))
    md = cli("plan", "--project-dir", str(p), "--format", "markdown", "--out", str(tmp_path / "other.json"))
    assert md.returncode == 0 and "| `t` |" in md.stdout
    # apply without a plan file and without a terminal refuses
    r = cli("apply", "--project-dir", str(p), input="")
    assert r.returncode == 2 and "--auto-approve" in r.stderr
    r = cli("apply", str(plan_file), "--project-dir", str(p))
    assert r.returncode == 0, r.stdout + r.stderr
    exactly_once(t, n)
    results = json.loads((p / "target" / "run_results.json").read_text())
    jsonschema.validate(results, load_schema("run_results.schema.json"))
    assert results["totals"]["succeeded"] == 3
    r = cli("plan", "--project-dir", str(p), "--detailed-exitcode")
    assert r.returncode == 0  # nothing left to do
    # the same plan again: refused, as Terraform refuses a saved plan once applied (issue 37 item 3)
    r = cli("apply", str(plan_file), "--project-dir", str(p), "--format", "json")
    assert r.returncode == 2 and f"this plan was applied by run {results['run_id']}" in r.stderr, r.stderr


def test_apply_auto_approve(tmp_path: Path) -> None:
    t, p, n = lake_project(tmp_path)
    r = cli("apply", "--project-dir", str(p), "--auto-approve")
    assert r.returncode == 0, r.stdout + r.stderr
    exactly_once(t, n)


def test_demo_runs_end_to_end(tmp_path: Path) -> None:
    r = cli("demo", str(tmp_path / "demo"), "--no-sink")
    assert r.returncode == 0, r.stdout[-3000:] + r.stderr[-3000:]
    assert re.search(r"events: files 300 -> 6", r.stdout), r.stdout[-2000:]
    assert "unchanged" in r.stdout
    # re-running recreates the demo dir it made itself
    assert cli("demo", str(tmp_path / "demo"), "--no-sink").returncode == 0
    (tmp_path / "other").mkdir()
    (tmp_path / "other" / "precious.txt").write_text("x")
    r = cli("demo", str(tmp_path / "other"))
    assert r.returncode == 2 and (tmp_path / "other" / "precious.txt").exists()


def test_demo_without_pyspark_skips_the_sink_and_succeeds(tmp_path: Path) -> None:
    """README's first command installs only the base package: no pyspark, so no sink part."""
    code = ("import sys; sys.modules['pyspark'] = None\n"  # as if the [spark] extra were not installed
            "from compactor.cli import cli; cli(['demo', sys.argv[1]], prog_name='compactor')")
    r = subprocess.run([sys.executable, "-c", code, str(tmp_path / "demo")], capture_output=True, text=True,
                       env={**os.environ, "COLUMNS": "160"})
    assert r.returncode == 0, r.stdout[-2000:] + r.stderr[-2000:]
    assert "file-sink demo skipped" in r.stdout and "events: files 300 -> 6" in r.stdout
