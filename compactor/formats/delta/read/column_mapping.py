"""Delta column mapping (PROTOCOL.md, "Column Mapping"): under ``delta.columnMapping.mode`` name or id,
data files name each column by its physical name (``delta.columnMapping.physicalName`` in the schema's
field metadata) and carry its id as the Parquet field id (``delta.columnMapping.id``), at every nesting
level; ``partitionValues`` and statistics are keyed by physical names, and partition folders named by them.
A rewrite reads and writes files in that physical schema, so nothing of the logical names reaches a file.

A table that enabled mapping after files were written (mode none -> name) gives its existing columns their
old names as physical names, so older files match by name as well."""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any

import pyarrow as pa

PHYSICAL = "delta.columnMapping.physicalName"
ID = "delta.columnMapping.id"
#: the Parquet field id pyarrow writes from an Arrow field's metadata
PARQUET_FIELD_ID = b"PARQUET:field_id"


class ColumnMappingError(Exception):
    """The table's schema does not say a column's physical name or id where its mode needs it."""


def mapping_mode(configuration: Mapping[str, str | None]) -> str:
    """``none``, ``name`` or ``id``."""
    return str(configuration.get("delta.columnMapping.mode") or "none")


def physical_schema(logical: pa.Schema, schema_json: str, mode: str) -> pa.Schema:
    """``logical`` (the table's Arrow schema, as delta-rs gives it) with each field renamed to its physical
    name and carrying its column mapping id as its Parquet field id, nested fields included; ``logical``
    itself when ``mode`` is none."""
    if mode == "none":
        return logical
    fields = json.loads(schema_json).get("fields") or []
    return pa.schema(_fields(list(logical), fields, mode, ""), metadata=logical.metadata)


def physical_names(schema_json: str, mode: str) -> dict[str, str]:
    """Each top-level column's physical name by its logical name (itself when ``mode`` is none)."""
    fields = json.loads(schema_json).get("fields") or []
    if mode == "none":
        return {str(f["name"]): str(f["name"]) for f in fields}
    return {str(f["name"]): _physical(f, str(f["name"])) for f in fields}


def _physical(field: Mapping[str, Any], where: str) -> str:
    name = (field.get("metadata") or {}).get(PHYSICAL)
    if not isinstance(name, str) or not name:
        raise ColumnMappingError(f"column {where} has no {PHYSICAL} in the table's schema")
    return name


def _fields(arrow: list[pa.Field], delta: list[Mapping[str, Any]], mode: str, at: str) -> list[pa.Field]:
    by_name = {str(f.get("name")): f for f in delta}
    out = []
    for a in arrow:
        where = f"{at}{a.name}"
        d = by_name.get(a.name)
        if d is None:
            raise ColumnMappingError(f"column {where} is not in the table's schema")
        ident = (d.get("metadata") or {}).get(ID)
        if not isinstance(ident, int):
            raise ColumnMappingError(f"column {where} has no {ID} in the table's schema")
        meta = dict(a.metadata or {})
        meta[PARQUET_FIELD_ID] = str(ident).encode()
        out.append(pa.field(_physical(d, where), _type(a.type, d.get("type"), mode, where + "."), a.nullable, meta))
    return out


def _type(arrow: pa.DataType, delta: Any, mode: str, at: str) -> pa.DataType:
    """``arrow`` with its nested fields physical (structs; the elements of lists and the keys and values of
    maps hold no names of their own, but structs inside them do)."""
    if not isinstance(delta, Mapping):
        return arrow
    kind = delta.get("type")
    if kind == "struct" and pa.types.is_struct(arrow):
        return pa.struct(_fields([arrow.field(i) for i in range(arrow.num_fields)], delta.get("fields") or [], mode, at))
    if kind == "array" and (pa.types.is_list(arrow) or pa.types.is_large_list(arrow)):
        element = _type(arrow.value_type, delta.get("elementType"), mode, at)
        item = arrow.value_field.with_type(element)
        return pa.large_list(item) if pa.types.is_large_list(arrow) else pa.list_(item)
    if kind == "map" and pa.types.is_map(arrow):
        key = arrow.key_field.with_type(_type(arrow.key_type, delta.get("keyType"), mode, at))
        value = arrow.item_field.with_type(_type(arrow.item_type, delta.get("valueType"), mode, at))
        return pa.map_(key, value, arrow.keys_sorted)
    return arrow
