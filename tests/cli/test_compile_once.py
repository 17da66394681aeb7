"""A command compiles the project once and hands it down (issue 20, as dbt's @requires does)."""

from __future__ import annotations

from pathlib import Path

import pytest
from click.testing import CliRunner

import compactor.project.compile as compile_module
from compactor.cli import cli
from tests.apply.helpers import make_table, one_table_project


@pytest.mark.parametrize("command", [["apply", "--auto-approve"], ["plan"]])
def test_plan_and_apply_without_a_plan_file_compile_once(tmp_path: Path, monkeypatch, command: list[str]) -> None:
    t = tmp_path / "lake" / "t"
    make_table(t, partitions=1, appends=3, rows=5)
    proj = one_table_project(tmp_path / "proj", t)
    calls: list[int] = []
    real = compile_module.compile_project

    def counted(*args, **kwargs):
        calls.append(1)
        return real(*args, **kwargs)

    monkeypatch.setattr(compile_module, "compile_project", counted)
    r = CliRunner().invoke(cli, [*command, "--project-dir", str(proj)], catch_exceptions=False)
    assert r.exit_code == 0, r.output
    assert len(calls) == 1


def test_report_compiles_once_and_reads_each_table_once(tmp_path: Path, monkeypatch) -> None:
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
