"""An action type's ``params`` as JSON Schema, generated from its dataclass fields (PURE).

Each field's schema follows from its annotation (int, str, bool, a Literal, ``X | None``, a tuple of
them, a Mapping of strings); ``field(metadata={"schema": {...}})`` adds keywords the type cannot say
(a minimum, minItems, a description) and ``"required": True`` makes a field with a default required in
the plan file. tasks/plan_schema.py puts one fragment per registered type into the plan schema."""

from __future__ import annotations

import types
import typing
from collections.abc import Mapping
from dataclasses import MISSING, fields
from typing import Any, Literal, Union, get_args, get_origin

_SCALARS: dict[object, str] = {int: "integer", str: "string", bool: "boolean", float: "number"}


def params_schema(cls: type, common: frozenset[str], *, derived: Mapping[str, Any]) -> dict[str, Any]:
    """``{"type": "object", "additionalProperties": false, "required": [...], "properties": {...}}`` of the
    fields of dataclass ``cls`` not in ``common``, then the ``derived`` params (name -> schema)."""
    hints = typing.get_type_hints(cls)
    props: dict[str, Any] = {}
    required = []
    for f in fields(cls):
        if f.name in common:
            continue
        props[f.name] = {**type_schema(hints[f.name]), **f.metadata.get("schema", {})}
        if f.metadata.get("required") or (f.default is MISSING and f.default_factory is MISSING):
            required.append(f.name)
    props.update(derived)
    out: dict[str, Any] = {"type": "object", "additionalProperties": False}
    if required:
        out["required"] = required
    out["properties"] = props
    return out


def type_schema(t: Any) -> dict[str, Any]:
    """The JSON Schema of values of type ``t`` as the plan file writes them (tuples as arrays)."""
    origin = get_origin(t)
    if origin is Literal:
        return {"enum": list(get_args(t))}
    if origin in (Union, types.UnionType):
        present = [a for a in get_args(t) if a is not type(None)]
        if len(present) != 1 or len(present) == len(get_args(t)):
            raise TypeError(f"no plan schema for {t!r}: only X | None")
        inner = type_schema(present[0])
        if "enum" in inner:
            return {"enum": [*inner["enum"], None]}
        return {**inner, "type": [inner["type"], "null"]}
    if origin is tuple:
        args = get_args(t)
        if len(args) != 2 or args[1] is not Ellipsis:
            raise TypeError(f"no plan schema for {t!r}: only tuple[X, ...]")
        return {"type": "array", "items": type_schema(args[0])}
    if origin in (Mapping, dict) or (isinstance(origin, type) and issubclass(origin, Mapping)):
        key, value = get_args(t)
        if key is not str:
            raise TypeError(f"no plan schema for {t!r}: keys must be strings")
        return {"type": "object", "additionalProperties": type_schema(value)}
    if t in _SCALARS:
        return {"type": _SCALARS[t]}
    raise TypeError(f"no plan schema for {t!r}")
