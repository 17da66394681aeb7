"""The pre-commit hook manifest parses, has pre-commit's required keys, names a real command, and that
command behaves as a hook must (exit 0 on valid policies, non-zero with file:line:col on invalid)."""

from __future__ import annotations

import re
import shlex
import subprocess
import sys
import tomllib
from pathlib import Path

import yaml

from compactor.cli import COMMANDS

REPO = Path(__file__).resolve().parents[1]
HOOKS = yaml.safe_load((REPO / ".pre-commit-hooks.yaml").read_text())
REQUIRED = {"id", "name", "entry", "language"}  # pre-commit's manifest schema


def _hook() -> dict:
    (hook,) = [h for h in HOOKS if h["id"] == "compactor-validate"]
    return hook


def test_manifest_is_a_list_of_hooks_with_the_required_keys() -> None:
    assert isinstance(HOOKS, list) and HOOKS
    for h in HOOKS:
        assert REQUIRED <= set(h), f"{h.get('id')}: missing {REQUIRED - set(h)}"
    hook = _hook()
    assert hook["language"] == "python" and hook["pass_filenames"] is False


def test_entry_is_the_console_script_and_a_registered_command() -> None:
    program, command = shlex.split(_hook()["entry"])
    scripts = tomllib.loads((REPO / "pyproject.toml").read_text())["project"]["scripts"]
    assert program in scripts and scripts[program] == "compactor.cli:run"
    assert command in COMMANDS


def test_files_pattern_matches_policy_yaml_only() -> None:
    files = re.compile(_hook()["files"])
    for path in ("policies/p.yml", "policies/team/a.yaml", "compactor.yml", "lake/compactor.yml",
                 "lake/policies/x.yml", "profiles.yml"):
        assert files.search(path), path
    for path in ("README.md", "policies/notes.md", "src/app.yml", ".github/workflows/ci.yml"):
        assert not files.search(path), path


def test_the_hook_command_passes_valid_and_fails_invalid_policies(tmp_path: Path) -> None:
    (tmp_path / "policies").mkdir()
    (tmp_path / "compactor.yml").write_text("name: p\n")
    policy = tmp_path / "policies" / "p.yml"
    policy.write_text("version: 1\ntables:\n  - name: a\n    path: /x\n")
    argv = [sys.executable, "-m", "compactor", *shlex.split(_hook()["entry"])[1:]]
    ok = subprocess.run(argv, cwd=tmp_path, capture_output=True, text=True)
    assert ok.returncode == 0, ok.stdout + ok.stderr
    policy.write_text("version: 1\ntables:\n  - name: a\n    path: /x\n    compaction: {strategy: fastest}\n")
    bad = subprocess.run(argv, cwd=tmp_path, capture_output=True, text=True)
    assert bad.returncode == 1 and "policies/p.yml:5:" in bad.stdout, bad.stdout
