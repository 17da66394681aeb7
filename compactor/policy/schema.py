"""JSON Schema validation (Draft 2020-12) with errors mapped to file:line:col diagnostics."""

from __future__ import annotations

import difflib
import functools
import hashlib
import json
import os
from collections.abc import Iterable
from importlib import resources
from pathlib import Path
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:  # pragma: no cover
    import jsonschema

from compactor.models.formats import FORMAT_NAMES, generation
from compactor.policy.diagnostics import Diagnostic
from compactor.policy.yamlpos import Located, join_path


def load_schema(name: str) -> dict[str, Any]:
    """A schema shipped with the package (compactor/schemas -> the repo's schemas/), its ``format`` enums
    the formats registered now (kept per registry generation: a format registered later is in the next)."""
    return _load_schema(name, generation())


@functools.cache
def _load_schema(name: str, _generation: int) -> dict[str, Any]:
    loaded: dict[str, Any] = json.loads(_schema_text(name))
    return loaded


def _validator(name: str, ref: str | None = None) -> jsonschema.Draft202012Validator:
    return _built_validator(name, ref, generation())


@functools.cache
def _built_validator(name: str, ref: str | None, _generation: int) -> jsonschema.Draft202012Validator:
    import jsonschema  # imported on first validation, not by every module that reads a schema

    schema = load_schema(name)
    if ref is not None:
        schema = {"$schema": schema["$schema"], "$defs": schema["$defs"], "$ref": ref}
    return jsonschema.Draft202012Validator(schema)


def _path_of(parts: Iterable[Any], base: str = "") -> str:
    path = base
    for p in parts:
        path = join_path(path, p)
    return path


def schema_diagnostics(doc: Located, file: str, schema: str, *, ref: str | None = None,
                       base: str = "", value: Any = None) -> list[Diagnostic]:
    """Validate ``value`` (default: the whole document) and map every error to a Diagnostic."""
    instance = doc.value if value is None else value
    key = _content_key(schema, ref, instance)
    if key is not None and key in _valid_memo():
        return []
    out: list[Diagnostic] = []
    for err in _validator(schema, ref).iter_errors(instance):
        out.extend(_to_diagnostics(err, doc, file, base))
    if not out and key is not None:
        remember_valid(key)
    return out


# A memo of documents already validated clean, so that `compactor apply` right after `compactor plan` (and
# every command on unchanged policies) does not import and run jsonschema again: jsonschema's import alone
# is 0.1-0.4 s of every command's start-up. A key is the sha256 of the schema's text and the rendered
# document, so any change to either validates again. It lives in the user's cache directory; when that
# cannot be written, every document is simply validated.
_MEMO_LIMIT = 4096


def _memo_file() -> Path:
    base = os.environ.get("COMPACTOR_CACHE_DIR") or os.path.join(
        os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache"), "compactor")
    return Path(base) / "validated.txt"


@functools.cache
def _valid_memo() -> set[str]:
    try:
        return set(_memo_file().read_text(encoding="ascii").split())
    except (OSError, ValueError):
        return set()


def _content_key(schema: str, ref: str | None, instance: Any) -> str | None:
    try:
        text = json.dumps([_schema_text(schema), ref, instance], sort_keys=True, separators=(",", ":"))
    except (TypeError, ValueError):
        return None
    return hashlib.sha256(text.encode()).hexdigest()


def _schema_text(name: str) -> str:
    return _cached_schema_text(name, generation())


@functools.cache
def _cached_schema_text(name: str, _generation: int) -> str:
    return schema_text(name)


def schema_text(name: str) -> str:
    """A schema shipped with the package, as text, its ``format`` properties an enum of the registered
    formats (compactor/models/formats.py): adding a format never edits a schema."""
    text = resources.files("compactor").joinpath("schemas", name).read_text(encoding="utf-8")
    doc = json.loads(text)
    if not _fill_format_enums(doc):
        return text if text.endswith("\n") else text + "\n"
    return json.dumps(doc, indent=2) + "\n"


def _fill_format_enums(node: Any) -> bool:
    """Give every ``format`` property described as a table format the registered names; True if any."""
    found = False
    if isinstance(node, dict):
        for key, value in node.items():
            if key == "format" and isinstance(value, dict) and "table format" in str(value.get("description", "")):
                value["enum"] = list(FORMAT_NAMES)
                found = True
            else:
                found = _fill_format_enums(value) or found
    elif isinstance(node, list):
        for item in node:
            found = _fill_format_enums(item) or found
    return found


def remember_valid(key: str) -> None:
    """Record ``key`` as validated clean (best effort)."""
    memo = _valid_memo()
    if key in memo:
        return
    memo.add(key)
    try:
        path = _memo_file()
        path.parent.mkdir(parents=True, exist_ok=True)
        keep = sorted(memo)[-_MEMO_LIMIT:] if len(memo) > _MEMO_LIMIT else None
        if keep is None:
            with open(path, "a", encoding="ascii") as f:
                f.write(key + "\n")
        else:
            path.write_text("\n".join(keep) + "\n", encoding="ascii")
    except OSError:
        pass


def known_valid(key: str) -> bool:
    return key in _valid_memo()


def _to_diagnostics(err: jsonschema.ValidationError, doc: Located, file: str, base: str) -> list[Diagnostic]:
    path = _path_of(err.absolute_path, base)
    kind = err.validator
    schema = err.schema if isinstance(err.schema, dict) else {}
    if kind == "additionalProperties":
        allowed = sorted((schema.get("properties") or {}).keys())
        extras = [k for k in (err.instance or {}) if k not in allowed] if isinstance(err.instance, dict) else []
        out = []
        for key in extras:
            kp = join_path(path, key)
            line, col = doc.positions.get(kp + ".<keypos>", doc.pos(kp))
            close = difflib.get_close_matches(key, allowed, n=1)
            hint: str | None = f"did you mean '{close[0]}'?" if close else f"allowed keys: {', '.join(allowed)}"
            out.append(Diagnostic(file, line, col, "unknown_key", f"unknown key '{key}'", kp, hint))
        return out
    line, col = doc.pos(path)
    if kind == "required":
        missing = err.message.split("'")[1] if "'" in err.message else err.message
        return [Diagnostic(file, line, col, "missing_key", f"required key '{missing}' is missing",
                           path, None)]
    desc = schema.get("description", "")
    if kind == "oneOf" and desc.startswith("bytes"):
        return [Diagnostic(file, line, col, "invalid_size", f"not a size: {err.instance!r}", path,
                           "use e.g. 512MB, 1GiB or a number of bytes")]
    if kind == "oneOf" and desc.startswith("seconds"):
        return [Diagnostic(file, line, col, "invalid_duration", f"not a duration: {err.instance!r}",
                           path, "use e.g. 30m, 168h, 7d")]
    if kind == "type":
        expected = schema.get("type")
        return [Diagnostic(file, line, col, "wrong_type",
                           f"expected {_type_words(expected)}, got {_type_name(err.instance)}", path, None)]
    if kind in ("enum", "const"):
        options = schema.get("enum") or [schema.get("const")]
        close = difflib.get_close_matches(str(err.instance), [str(o) for o in options], n=1)
        hint = f"did you mean '{close[0]}'?" if close else None
        return [Diagnostic(file, line, col, "invalid_value",
                           f"{err.instance!r} is not one of {', '.join(repr(o) for o in options)}", path, hint)]
    if kind in ("minimum", "maximum", "exclusiveMinimum", "exclusiveMaximum"):
        return [Diagnostic(file, line, col, "out_of_range", err.message, path, None)]
    if kind in ("minLength", "minItems", "minProperties"):
        return [Diagnostic(file, line, col, "empty_value", "must not be empty", path, None)]
    if kind == "pattern":
        return [Diagnostic(file, line, col, "invalid_format", f"{err.instance!r} has an invalid format", path,
                           desc or "names may use letters, digits, _ . - /")]
    return [Diagnostic(file, line, col, "schema", err.message, path, None)]


def _type_name(v: Any) -> str:
    if v is None:
        return "null"
    return {bool: "boolean", int: "integer", float: "number", str: "string", list: "list",
            dict: "mapping"}.get(type(v), type(v).__name__)


def _type_words(t: Any) -> str:
    names: dict[str, str] = {"object": "a mapping", "array": "a list", "string": "a string", "integer": "an integer",
             "number": "a number", "boolean": "true/false"}
    if isinstance(t, list):
        return " or ".join(names.get(str(x), str(x)) for x in t)
    return names.get(t, str(t))
