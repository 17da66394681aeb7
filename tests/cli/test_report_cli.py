"""`compactor report` from the CLI: saved plans, unreadable tables, bad input (exit codes, no tracebacks)."""

from __future__ import annotations

import re
from pathlib import Path

from click.testing import CliRunner
from deltalake import DeltaTable

from compactor import api
from compactor.api import ProjectOptions
from compactor.cli.report import command as report_command
from tests.apply.helpers import make_table


def _project(tmp_path: Path, *tables: tuple[str, Path]) -> Path:
    p = tmp_path / "proj"
    (p / "policies").mkdir(parents=True)
    (p / "compactor.yml").write_text("name: p\n")
    body = "".join(f"  - name: {n}\n    path: {path}\n    compaction:\n      target_file_size: 1MiB\n"
                   "      triggers: {min_input_files: 2}\n" for n, path in tables)
    (p / "policies" / "t.yml").write_text(f"version: 1\ntables:\n{body}")
    return p


def test_saved_plan_is_what_the_report_highlights(tmp_path: Path) -> None:
    t = tmp_path / "lake" / "t"
    make_table(t, partitions=3, appends=3)
    p = _project(tmp_path, ("t", t))
    plan_file = tmp_path / "plan.json"
    api.plan(ProjectOptions(project_dir=p), out=plan_file)
    DeltaTable(str(t)).optimize.compact()  # the lake moves on; the saved plan still names 3 partitions
    out = tmp_path / "r.html"
    r = CliRunner().invoke(report_command, ["--project-dir", str(p), "--plan", str(plan_file), "--out", str(out)])
    assert r.exit_code == 0, r.output
    page = out.read_text()
    assert len(re.findall(r'data-planned="true"', page)) == 3
    # a fresh plan (no --plan) has nothing left to compact
    r = CliRunner().invoke(report_command, ["--project-dir", str(p)])
    assert r.exit_code == 0, r.output
    fresh = (p / "target" / "report.html").read_text()
    assert 'data-planned="true"' not in fresh
    hist = re.search(r'data-chart="size-histogram".*?</svg>', fresh, re.S).group(0)
    assert sum(int(v) for v in re.findall(r'data-value="(\d+)"', hist)) == 3  # one file per partition now


def test_unreadable_table_gets_a_note_and_others_still_render(tmp_path: Path) -> None:
    good = tmp_path / "lake" / "good"
    make_table(good, partitions=1, appends=2)
    p = _project(tmp_path, ("good", good), ("gone", tmp_path / "lake" / "gone"))
    out = tmp_path / "r.html"
    r = CliRunner().invoke(report_command, ["--project-dir", str(p), "--out", str(out)])
    assert r.exit_code == 0, r.output
    page = out.read_text()
    gone = re.search(r'<section class="table" data-table="gone">.*?</section>', page, re.S).group(0)
    assert 'class="err"' in gone and "<svg" not in gone
    assert re.search(r'<section class="table" data-table="good">.*data-chart="size-histogram"', page, re.S)


def test_bad_input_exits_2_without_traceback(tmp_path: Path) -> None:
    t = tmp_path / "lake" / "t"
    make_table(t, partitions=1, appends=1)
    p = _project(tmp_path, ("t", t))
    bad_plan = tmp_path / "plan.json"
    bad_plan.write_text("{not json")
    cli = CliRunner()
    for args in (["--plan", str(bad_plan)], ["--plan", str(tmp_path / "absent.json")], ["--format", "gif"]):
        r = cli.invoke(report_command, ["--project-dir", str(p), *args])
        assert r.exit_code == 2, (args, r.output)
        assert "Traceback" not in r.output
    r = cli.invoke(report_command, ["--project-dir", str(tmp_path / "no-project")])
    assert r.exit_code == 2 and "Traceback" not in r.output


def test_png_without_chromium_is_a_usage_error(tmp_path: Path) -> None:
    import os
    import subprocess
    import sys

    t = tmp_path / "lake" / "t"
    make_table(t, partitions=1, appends=2)
    p = _project(tmp_path, ("t", t))
    env = {**os.environ, "PATH": str(tmp_path / "empty-bin")}  # no chromium on this PATH
    r = subprocess.run([sys.executable, "-m", "compactor", "report", "--project-dir", str(p), "--format", "png"],
                       capture_output=True, text=True, env=env)
    assert r.returncode == 2, (r.stdout, r.stderr)
    assert "Chromium" in r.stdout + r.stderr and "Traceback" not in r.stdout + r.stderr
