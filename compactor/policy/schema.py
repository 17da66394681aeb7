"""JSON Schema validation (Draft 2020-12) with errors mapped to file:line:col diagnostics."""

from __future__ import annotations

import difflib
import functools
import json
from importlib import resources
from typing import TYPE_CHECKING, Any, Iterable

if TYPE_CHECKING:  # pragma: no cover
    import jsonschema

from compactor.policy.diagnostics import Diagnostic
from compactor.policy.yamlpos import Located, join_path


@functools.cache
def load_schema(name: str) -> dict[str, Any]:
    """A schema shipped with the package (compactor/schemas -> the repo's schemas/)."""
    text = resources.files("compactor").joinpath("schemas", name).read_text(encoding="utf-8")
    return json.loads(text)


@functools.cache
def _validator(name: str, ref: str | None = None) -> "jsonschema.Draft202012Validator":
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
    out: list[Diagnostic] = []
    for err in _validator(schema, ref).iter_errors(instance):
        out.extend(_to_diagnostics(err, doc, file, base))
    return out


def _to_diagnostics(err: "jsonschema.ValidationError", doc: Located, file: str, base: str) -> list[Diagnostic]:
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
            hint = f"did you mean '{close[0]}'?" if close else f"allowed keys: {', '.join(allowed)}"
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
                           "names may use letters, digits, _ . - /")]
    return [Diagnostic(file, line, col, "schema", err.message, path, None)]


def _type_name(v: Any) -> str:
    if v is None:
        return "null"
    return {bool: "boolean", int: "integer", float: "number", str: "string", list: "list",
            dict: "mapping"}.get(type(v), type(v).__name__)


def _type_words(t: Any) -> str:
    names = {"object": "a mapping", "array": "a list", "string": "a string", "integer": "an integer",
             "number": "a number", "boolean": "true/false"}
    if isinstance(t, list):
        return " or ".join(names.get(x, x) for x in t)
    return names.get(t, str(t))
