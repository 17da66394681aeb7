"""Read and write plan files (validated against schemas/plan.schema.json, with its generated parts:
tasks/plan_schema.py; a plan of schema version 1 against schemas/plan.v1.schema.json).

A plan file carries ``digest``: sha256 of its own content as written (planning/plan.py, plan_digest), so
a version-1 plan's digest verifies too. Loading recomputes it, so apply can refuse a plan that was edited
after `compactor plan` wrote it."""

from __future__ import annotations

import hashlib
import hmac
import json
from pathlib import Path
from typing import IO, Any

from compactor import __version__
from compactor.errors import PlanError
from compactor.planning.plan import (
    SCHEMA_VERSION,
    SCHEMA_VERSIONS,
    Plan,
    dumps_action,
    dumps_compact,
    plan_digest,
    plan_from_dict,
    plan_to_dict,
)
from compactor.policy.schema import known_valid, load_schema, remember_valid
from compactor.runtime.atomic_file import replacing

#: the environment variable holding the key of signed plans (`plan --sign`, `apply --require-signature`)
KEY_ENV = "COMPACTOR_PLAN_KEY"


def signature(digest: str, key: bytes) -> str:
    """HMAC-SHA256 of the plan's digest (which covers all of its content) under a deploy pipeline's key."""
    return "hmac-sha256:" + hmac.new(key, digest.encode(), hashlib.sha256).hexdigest()


def write_plan(plan: Plan, path: Path, *, sign_key: bytes | None = None) -> Path:
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    with replacing(path) as f:
        digest = _write_compact_json(plan_to_dict(plan), f, sign_key)
    remember_valid(_trust_key(digest))  # compactor's own plans match plan.schema.json (tested)
    return path


def _write_compact_json(data: dict[str, Any], f: IO[str], sign_key: bytes | None = None) -> str:
    """Write the plan with its digest, serialising each piece once: the pieces plan_digest hashes are
    the ones written. Action by action: json.dump streams through the pure-Python encoder (10x slower on
    a million paths), and one json.dumps of everything would hold the whole text."""
    h = hashlib.sha256()

    def piece(text: str) -> str:
        h.update(text.encode())
        return text

    f.write('{"tables":[')
    for ti, table in enumerate(data["tables"]):
        if ti:
            f.write(",")
        f.write('{"actions":[')
        for ai, action in enumerate(table["actions"]):
            if ai:
                f.write(",")
            f.write(piece(dumps_action(action)))
        rest = piece(dumps_compact({k: v for k, v in table.items() if k != "actions"}))
        f.write("]," + rest[1:] if rest != "{}" else "]}")
    rest = piece(dumps_compact({k: v for k, v in data.items() if k not in ("tables", "digest")}))
    digest = "sha256:" + h.hexdigest()
    tail = f'"digest":"{digest}"' + (f',"signature":"{signature(digest, sign_key)}"' if sign_key else "")
    f.write("]," + rest[1:-1] + f",{tail}}}" if rest != "{}" else f"],{tail}}}")
    return digest


def _trust_key(digest: str) -> str:
    """The memo key of a plan this compactor version wrote (policy/schema.py's memo of valid content)."""
    return f"plan:{__version__}:{digest}"


def validate_plan_dict(data: object, path: Path | None = None) -> None:
    if not isinstance(data, dict):
        raise PlanError("plan file is not a JSON object")
    version = data.get("schema_version")
    if version not in SCHEMA_VERSIONS or isinstance(version, bool):
        raise PlanError(f"plan schema_version {version!r} is not supported (this compactor reads "
                        f"{', '.join(map(str, SCHEMA_VERSIONS))})",
                        hint="re-run `compactor plan` with this compactor version")
    if not data.get("digest"):
        raise PlanError(f"plan file {path or ''} has no digest: compactor writes one into every plan, so it was "
                        "edited".replace("  ", " "),
                        hint="re-run `compactor plan` and review the new plan")
    import jsonschema

    from compactor.tasks.plan_schema import plan_schema

    name, schema = ("plan.schema.json", plan_schema()) if version == SCHEMA_VERSION else \
        (f"plan.v{version}.schema.json", load_schema(f"plan.v{version}.schema.json"))
    err = jsonschema.exceptions.best_match(jsonschema.Draft202012Validator(schema).iter_errors(data))
    if err is not None:
        where = "/".join(str(p) for p in err.absolute_path) or "(root)"
        raise PlanError(f"plan file does not match {name} at {where}: {err.message[:300]}")


def load_plan(path: Path, *, require_key: bytes | None = None) -> Plan:
    """The plan in ``path``, its digest checked. ``require_key``: the plan must also carry a signature
    made with this key (`compactor plan --sign`)."""
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
    written = data.get("digest") if isinstance(data, dict) else None
    try:
        actual = plan_digest(data) if written is not None else None
    except (TypeError, AttributeError, ValueError, RecursionError):  # not shaped like a plan: the schema says how
        actual = None
    if written is None or actual != written or not known_valid(_trust_key(written)):
        try:
            validate_plan_dict(data, path)  # a plan this compactor did not write itself is checked against the schema
        except RecursionError:  # below json's limit but deeper than the schema validator can walk
            raise PlanError(f"plan file {path} is nested too deeply to be a compactor plan") from None
    if written is not None and actual != written:
        raise PlanError(f"plan file {path} was modified after `compactor plan` wrote it (its content does not "
                        "match its digest)", hint="re-run `compactor plan` and review the new plan")
    if require_key is not None:
        signed = data.get("signature")
        if not signed:
            raise PlanError(f"plan file {path} is not signed", hint="sign it with `compactor plan --sign` "
                            f"({KEY_ENV} set to the pipeline's key)")
        if not hmac.compare_digest(str(signed), signature(str(written), require_key)):
            raise PlanError(f"plan file {path} is not signed with this key ({KEY_ENV})",
                            hint="re-run `compactor plan --sign` with the pipeline's key")
    return plan_from_dict(data)
