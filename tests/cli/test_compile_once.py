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
