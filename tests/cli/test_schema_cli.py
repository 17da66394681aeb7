"""`compactor schema` prints the packaged JSON Schemas; `init` points editors at an offline copy of the
policy schema through the yaml-language-server modeline (VS Code's YAML extension, Neovim, Helix) and
JetBrains' `# $schema:` comment."""

from __future__ import annotations

import json
from pathlib import Path

import jsonschema
import pytest
import yaml

from compactor.models.formats import FORMAT_NAMES
from compactor.policy.schema import load_schema
from tests.cli.test_cli import REPO, cli

MODELINE = "# yaml-language-server: $schema="
JETBRAINS = "# $schema: "


@pytest.mark.parametrize("name", ["policy", "project", "profiles", "plan", "run_results"])
def test_schema_prints_the_packaged_schema(name: str) -> None:
    r = cli("schema", name)
    assert r.returncode == 0, r.stderr
    assert json.loads(r.stdout) == load_schema(f"{name}.schema.json")
    shipped = json.loads((REPO / "schemas" / f"{name}.schema.json").read_text())
    # the shipped file, with every table-format property an enum of the registered formats
    printed = json.loads(r.stdout)
    enums = _format_enums(printed)
    assert all(e == list(FORMAT_NAMES) for e in enums)
    assert bool(enums) == (name in ("policy", "plan"))
    assert _without_format_enums(printed) == shipped


def _format_enums(node: object) -> list[object]:
    if isinstance(node, dict):
        own = [v["enum"] for k, v in node.items() if k == "format" and isinstance(v, dict) and "enum" in v
               and "table format" in v.get("description", "")]
        return own + [e for v in node.values() for e in _format_enums(v)]
    if isinstance(node, list):
        return [e for v in node for e in _format_enums(v)]
    return []


def _without_format_enums(node: object) -> object:
    if isinstance(node, dict):
        return {k: ({x: y for x, y in v.items() if x != "enum"} if k == "format" and isinstance(v, dict)
                    and "table format" in v.get("description", "") else _without_format_enums(v))
                for k, v in node.items()}
    if isinstance(node, list):
        return [_without_format_enums(v) for v in node]
    return node


def test_schema_defaults_to_the_policy_schema_and_refuses_unknown_names() -> None:
    r = cli("schema")
    assert r.returncode == 0 and json.loads(r.stdout)["title"] == "compactor policy file"
    bad = cli("schema", "nope")
    assert bad.returncode == 2 and "Traceback" not in bad.stderr


def test_init_writes_the_schema_comment_and_an_offline_schema(tmp_path: Path) -> None:
    assert cli("init", str(tmp_path / "lake")).returncode == 0
    policy = tmp_path / "lake" / "policies" / "example.yml"
    first, second = policy.read_text().splitlines()[:2]
    assert first.startswith(MODELINE) and second.startswith(JETBRAINS)
    # both name the same file, relative to the policy file (how editors resolve relative paths)
    target = (policy.parent / first.removeprefix(MODELINE)).resolve()
    assert target == (policy.parent / second.removeprefix(JETBRAINS)).resolve()
    assert target == (tmp_path / "lake" / "schemas" / "policy.schema.json").resolve()
    assert target.read_text() == cli("schema").stdout
    # an editor validating the untouched example against that schema finds nothing to underline
    jsonschema.validate(yaml.safe_load(policy.read_text()), json.loads(target.read_text()))
    assert cli("validate", "--project-dir", str(tmp_path / "lake")).returncode == 0
