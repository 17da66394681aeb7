"""A --select that matches nothing behaves as in dbt: a warning per criterion that matches no table,
"nothing to do", exit 0; --fail-on-empty turns an empty selection into exit 1."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.cli.test_cli import cli, project

POLICY = "version: 1\ntables:\n  - name: a\n    path: /x/a\n    tags: [nightly]\n  - name: b\n    path: /x/b\n"
CRITERION = "Warning: the selection criterion 'nope' does not match any table\n"


@pytest.mark.parametrize("command", ["validate", "plan", "compile", "report"])
def test_empty_selection_warns_and_exits_0(tmp_path: Path, command: str) -> None:
    p = project(tmp_path, POLICY)
    r = cli(command, "--project-dir", str(p), "--select", "nope")
    assert r.returncode == 0, r.stdout + r.stderr
    assert CRITERION in r.stderr
    assert "Warning: nothing to do: no table selected" in r.stderr
    assert "Traceback" not in r.stderr


@pytest.mark.parametrize("command", ["validate", "plan", "compile", "report", "apply"])
def test_fail_on_empty_exits_1_and_writes_nothing(tmp_path: Path, command: str) -> None:
    p = project(tmp_path, POLICY)
    args = ["--auto-approve"] if command == "apply" else []
    r = cli(command, "--project-dir", str(p), "--select", "tag:weekly", "--exclude", "b", "--fail-on-empty", *args)
    assert r.returncode == 1, r.stdout + r.stderr
    assert "the selection criterion 'tag:weekly' does not match any table" in r.stderr
    assert "Error: no table selected (--fail-on-empty)\n" in r.stderr
    assert not (p / "target").exists()  # no plan, report or run results written


def test_exclude_that_removes_everything_is_empty_too(tmp_path: Path) -> None:
    p = project(tmp_path, POLICY)
    r = cli("validate", "--project-dir", str(p), "--exclude", "a b", "--fail-on-empty")
    assert r.returncode == 1
    assert "does not match" not in r.stderr  # the excludes matched; what is left is empty
    assert "no table selected" in r.stderr


def test_one_unmatched_criterion_among_matching_ones_only_warns(tmp_path: Path) -> None:
    p = project(tmp_path, POLICY)
    r = cli("validate", "--project-dir", str(p), "--select", "tag:nightly nope", "--fail-on-empty")
    assert r.returncode == 0, r.stdout + r.stderr
    assert r.stderr == CRITERION


def test_no_warning_when_the_selection_matches(tmp_path: Path) -> None:
    p = project(tmp_path, POLICY)
    r = cli("plan", "--project-dir", str(p), "--select", "a", "--fail-on-empty", "--format", "json")
    assert r.returncode == 1  # /x/a does not exist: the table cannot be planned (not a selection problem)
    assert "Warning" not in r.stderr and "no table selected" not in r.stderr
