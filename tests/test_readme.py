"""README is part of the product: its commands and references must match the code."""

from __future__ import annotations

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
    assert block[0].split("#")[0].strip() == "pip install -e . && compactor demo"
    test_cmd = block[1].split("#")[0].strip()
    assert test_cmd.endswith("python -m pytest -q")
    ci = (REPO / ".ci" / "run").read_text().splitlines()
    assert test_cmd in [line.strip() for line in ci], "the CI script must run README's test command exactly"


def test_every_cli_command_in_the_registry_is_documented() -> None:
    from compactor.cli import COMMANDS
    import importlib

    for name, module in COMMANDS.items():
        try:
            importlib.import_module(f"compactor.cli.{module}")
        except ModuleNotFoundError:
            continue  # not built in this version
        assert f"compactor {name}" in README, f"`compactor {name}` is not documented in README"
