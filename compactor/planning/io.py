"""Read and write plan files (validated against schemas/plan.schema.json)."""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import TextIO

from compactor.errors import PlanError
from compactor.planning.plan import SCHEMA_VERSION, Plan, plan_from_dict, plan_to_dict
from compactor.policy.schema import load_schema


def write_plan(plan: Plan, path: Path) -> Path:
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(f".{path.name}.tmp")
    with open(tmp, "w", encoding="utf-8") as f:
        _write_compact_json(plan_to_dict(plan), f)
    os.replace(tmp, path)
    return path


def _dumps(value: object) -> str:
    return json.dumps(value, separators=(",", ":"))


def _write_compact_json(data: dict, f: TextIO) -> None:
    """Same document as json.dump, action by action: json.dump streams through the pure-Python
    encoder (10x slower on a million paths), one json.dumps of everything holds the whole text."""
    tables = data["tables"]
    f.write('{"tables":[')
    for ti, table in enumerate(tables):
        if ti:
            f.write(",")
        f.write('{"actions":[')
        for ai, action in enumerate(table["actions"]):
            if ai:
                f.write(",")
            f.write(_dumps(action))
        rest = _dumps({k: v for k, v in table.items() if k != "actions"})
        f.write("]," + rest[1:] if rest != "{}" else "]}")
    rest = _dumps({k: v for k, v in data.items() if k != "tables"})
    f.write("]," + rest[1:] if rest != "{}" else "]}")


def validate_plan_dict(data: object) -> None:
    if not isinstance(data, dict):
        raise PlanError("plan file is not a JSON object")
    version = data.get("schema_version")
    if version != SCHEMA_VERSION:
        raise PlanError(f"plan schema_version {version!r} is not supported (this compactor reads {SCHEMA_VERSION})",
                        hint="re-run `compactor plan` with this compactor version")
    import jsonschema

    err = jsonschema.exceptions.best_match(jsonschema.Draft202012Validator(load_schema("plan.schema.json")).iter_errors(data))
    if err is not None:
        where = "/".join(str(p) for p in err.absolute_path) or "(root)"
        raise PlanError(f"plan file does not match plan.schema.json at {where}: {err.message[:300]}")


def load_plan(path: Path) -> Plan:
    path = Path(path)
    try:
        with open(path, encoding="utf-8") as f:
            data = json.load(f)
    except FileNotFoundError:
        raise PlanError(f"plan file not found: {path}", hint="run `compactor plan --out FILE` first") from None
    except (OSError, UnicodeDecodeError) as e:
        raise PlanError(f"cannot read plan file {path}: {e}") from None
    except json.JSONDecodeError as e:
        raise PlanError(f"plan file {path} is not valid JSON (line {e.lineno}, col {e.colno}): {e.msg}") from None
    except RecursionError:
        raise PlanError(f"plan file {path} is nested too deeply to be a compactor plan") from None
    try:
        validate_plan_dict(data)
    except RecursionError:  # below json's limit but deeper than the schema validator can walk
        raise PlanError(f"plan file {path} is nested too deeply to be a compactor plan") from None
    return plan_from_dict(data)
