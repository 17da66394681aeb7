"""Each command compiles the project once and hands it down (cli -> api -> tasks), as dbt's ``@requires``
hands its loaded project to the task. Counted in the CLI's own process: validate_project (the whole compile:
load, render, validate; compile_project goes through it) is wrapped, nothing else changes (the table, the
engine and the project are real)."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest
from click.testing import CliRunner

import compactor.project.compile as compile_module
from compactor.cli import cli
from tests.apply.helpers import make_table, one_table_project
from tests.cli.test_cli import lake_project

COUNTING = (
    "import atexit, sys\n"
    "import compactor.project.compile as c\n"
    "calls = []\n"
    "real = c.validate_project\n"
    "def counted(*a, **k):\n    calls.append(1)\n    return real(*a, **k)\n"
    "c.validate_project = counted\n"
    "atexit.register(lambda: print(f'COMPILES={len(calls)}', file=sys.stderr))\n"
    "from compactor.cli import main\nsys.argv = ['compactor'] + sys.argv[1:]\nmain()\n"
)


def _compiles(*args: str) -> tuple[int, str]:
    r = subprocess.run([sys.executable, "-c", COUNTING, *args], capture_output=True, text=True,
                       env={**os.environ, "COLUMNS": "160"})
    counts = [line for line in r.stderr.splitlines() if line.startswith("COMPILES=")]
    assert counts, r.stdout + r.stderr
    return int(counts[-1].split("=")[1]), r.stdout + r.stderr


@pytest.mark.parametrize("command", [
    ["validate"], ["ls"], ["plan"], ["apply", "--auto-approve", "--watch", "0"], ["compile"],
    ["report", "--out", "{tmp}/report.html"], ["inspect", "t"],
])
def test_each_command_compiles_the_project_once(tmp_path: Path, command: list[str]) -> None:
    _, p, _ = lake_project(tmp_path)
    args = [a.replace("{tmp}", str(tmp_path)) for a in command]
    n, out = _compiles(*args, "--project-dir", str(p))
    assert n == 1, f"{' '.join(command)} compiled the project {n} times\n{out}"


def test_apply_of_a_plan_file_compiles_once(tmp_path: Path) -> None:
    _, p, _ = lake_project(tmp_path)
    n, out = _compiles("plan", "--project-dir", str(p))
    assert n == 1, out
    n, out = _compiles("apply", str(p / "target" / "plan.json"), "--project-dir", str(p), "--watch", "0")
    assert n == 1, out


def test_report_reads_each_table_once(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    import compactor.tasks.plan as plan_module

    t = tmp_path / "lake" / "t"
    make_table(t, partitions=1, appends=3, rows=5)
    proj = one_table_project(tmp_path / "proj", t)
    compiles: list[int] = []
    reads: list[str] = []
    real_compile, real_read = compile_module.compile_project, plan_module.read_state

    def counted_compile(*args, **kwargs):
        compiles.append(1)
        return real_compile(*args, **kwargs)

    def counted_read(policy, target):
        reads.append(policy.name)
        return real_read(policy, target)

    monkeypatch.setattr(compile_module, "compile_project", counted_compile)
    monkeypatch.setattr(plan_module, "read_state", counted_read)
    r = CliRunner().invoke(cli, ["report", "--project-dir", str(proj), "--out", str(tmp_path / "r.html")],
                           catch_exceptions=False)
    assert r.exit_code == 0, r.output
    assert len(compiles) == 1 and reads == ["t"]
