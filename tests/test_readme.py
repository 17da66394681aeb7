"""README is part of the product: its commands and references must match the code."""

from __future__ import annotations

import os
import re
from pathlib import Path

from compactor.policy.schema import load_schema

REPO = Path(__file__).resolve().parents[1]
README = (REPO / "README.md").read_text()


def _policy_keys() -> set[str]:
    schema = load_schema("policy.schema.json")
    keys: set[str] = set()
    for d in schema["$defs"].values():
        keys |= set((d.get("properties") or {}).keys())
    return keys


def test_policy_reference_names_every_schema_key() -> None:
    section = README.split("## Policy reference", 1)[1].split("\n## ", 1)[0]
    # keys are written as code: `target_file_size`, `compaction.budget.max_bytes_per_run`, `{column, period}`
    tokens = {tok for code in re.findall(r"`([^`]+)`", section) for tok in re.findall(r"[A-Za-z_]+", code)}
    missing = sorted(_policy_keys() - tokens)
    assert not missing, f"README policy reference does not mention: {missing}"


def test_readme_starts_with_demo_and_test_commands_and_ci_runs_the_same() -> None:
    block = README.split("```bash", 1)[1].split("```", 1)[0].strip().splitlines()
    assert len(block) == 2
    # a venv: Debian's system Python refuses `pip install` (PEP 668)
    demo_cmd = block[0].split("#")[0].strip()
    assert demo_cmd == "python3 -m venv .venv && . .venv/bin/activate && pip install -e . && compactor demo"
    test_cmd = block[1].split("#")[0].strip()
    assert test_cmd == "./scripts/test"
    script = REPO / "scripts" / "test"
    assert os.access(script, os.X_OK) and script.read_text().startswith("#!/usr/bin/env bash\n")
    # it ends by running pytest with the caller's arguments
    assert script.read_text().rstrip().splitlines()[-1] == 'exec python -m pytest -q "$@"'
    ci = [line.strip() for line in (REPO / ".ci" / "run").read_text().splitlines()]
    assert test_cmd in ci, "the CI script must run README's test command exactly"
    commands = [line for line in ci if line and not line.startswith("#")]
    assert not [c for c in commands if "pytest" in c or "pip install" in c], "CI must not test another way"


def test_every_cli_command_in_the_registry_is_documented() -> None:
    import importlib

    from compactor.cli import COMMANDS

    for name, module in COMMANDS.items():
        try:
            importlib.import_module(f"compactor.cli.{module}")
        except ModuleNotFoundError:
            continue  # not built in this version
        assert f"compactor {name}" in README, f"`compactor {name}` is not documented in README"
