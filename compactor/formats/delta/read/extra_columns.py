"""Data files holding columns the table lacks, which delta-spark's ``REORG TABLE ... APPLY (PURGE)`` rewrites
beside the files with deletion vectors (DeltaPurgeOperation.filterFilesToReorg, ReorgTableHelper
.fileHasExtraColumns): a field of the file's schema, at any nesting level (struct fields; a list's element, a
map's key and value), that the table's physical schema does not have, compared case-insensitively, other than
the materialized row id and row commit version columns of row tracking. Found in practice: delta-spark's
UPDATE, DELETE and MERGE on a table with the change data feed write ``_change_type`` and ``__is_cdc`` into
their data files; files written before a DROP COLUMN under column mapping keep the dropped column.

Only footers are read (one small read per file), and only of the files the caller names (the purge's
partitions)."""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from typing import Any

import pyarrow as pa

from compactor.formats.delta.read.column_mapping import PHYSICAL
from compactor.models.state import TableState
from compactor.models.table import TableLocation

#: table properties naming row tracking's materialized columns (delta-spark's MaterializedRowId and
#: MaterializedRowCommitVersion): kept in data files though the schema does not list them
ROW_TRACKING_COLUMNS = ("delta.rowTracking.materializedRowIdColumnName",
                        "delta.rowTracking.materializedRowCommitVersionColumnName")


def table_paths(schema_json: str, mapped: bool) -> frozenset[tuple[str, ...]]:
    """Every field path of the table's physical schema (lower case; physical names when ``mapped``;
    ``element``, ``key`` and ``value`` for the insides of lists and maps)."""
    out: set[tuple[str, ...]] = set()

    def walk(kind: Any, at: tuple[str, ...]) -> None:
        if not isinstance(kind, Mapping):
            return
        t = kind.get("type")
        if t == "struct":
            for f in kind.get("fields") or []:
                name = str((f.get("metadata") or {}).get(PHYSICAL) or f["name"]) if mapped else str(f["name"])
                path = (*at, name.lower())
                out.add(path)
                walk(f.get("type"), path)
        elif t == "array":
            out.add((*at, "element"))
            walk(kind.get("elementType"), (*at, "element"))
        elif t == "map":
            out.update({(*at, "key"), (*at, "value")})
            walk(kind.get("keyType"), (*at, "key"))
            walk(kind.get("valueType"), (*at, "value"))

    walk(json.loads(schema_json), ())
    return frozenset(out)


def extra_columns(file_schema: pa.Schema, known: frozenset[tuple[str, ...]],
                  row_tracking: Iterable[str] = ()) -> tuple[str, ...]:
    """The fields of ``file_schema`` (a data file's, from its footer) whose path is not in ``known``
    (table_paths), dotted; none at all when the file holds only the table's columns."""
    kept = {n for n in row_tracking if n}
    out: list[str] = []

    def walk(t: pa.DataType, at: tuple[str, ...]) -> None:
        if pa.types.is_struct(t):
            for i in range(t.num_fields):
                field(t.field(i), at)
        elif pa.types.is_list(t) or pa.types.is_large_list(t) or pa.types.is_fixed_size_list(t):
            inside(t.value_type, (*at, "element"))
        elif pa.types.is_map(t):
            inside(t.key_type, (*at, "key"))
            inside(t.item_type, (*at, "value"))

    def inside(t: pa.DataType, path: tuple[str, ...]) -> None:
        if path not in known:  # delta-spark names a collection's insides element/key/value whatever parquet says
            out.append(".".join(path))
            return
        walk(t, path)

    def field(f: pa.Field, at: tuple[str, ...]) -> None:
        path = (*at, f.name.lower())
        if path not in known and f.name not in kept:
            out.append(".".join((*at, f.name)))
            return  # its insides are extra with it
        walk(f.type, path)

    for f in file_schema:
        field(f, ())
    return tuple(out)


def files_with_extra_columns(where: TableLocation, paths: Sequence[str], schema_json: str,
                             configuration: Mapping[str, str | None]) -> dict[str, tuple[str, ...]]:
    """Of ``paths`` (logical, relative to the table root), those whose footer holds a column the table lacks,
    with those columns."""
    if not paths:
        return {}
    import pyarrow.parquet as pq

    from compactor.runtime.paths import filesystem, join

    mapped = str(configuration.get("delta.columnMapping.mode") or "none") != "none"
    known = table_paths(schema_json, mapped)
    row_tracking = [str(configuration.get(k) or "") for k in ROW_TRACKING_COLUMNS]

    def one(path: str) -> tuple[str, tuple[str, ...]]:
        fs, fp = filesystem(join(where.uri, path), where.storage_options)
        with fs.open_input_file(fp) as f:
            schema = pq.read_schema(f)
        return path, extra_columns(schema, known, row_tracking)

    with ThreadPoolExecutor(max_workers=min(8, len(paths)), thread_name_prefix="footer") as pool:
        return {p: cols for p, cols in pool.map(one, paths) if cols}


def beside_deletion_vectors(where: TableLocation, state: TableState) -> dict[str, tuple[str, ...]] | None:
    """files_with_extra_columns of the files without a deletion vector in the partitions holding a file with
    one (those a purge may REORG); None when the table's schema or deletion vectors are not known."""
    from compactor.formats.delta.read.facts import delta_facts
    from compactor.planning.partitions import partition_key_column

    facts = delta_facts(state)
    deleted = facts.deleted_rows
    if facts.schema_json is None or deleted is None:
        return None
    keys = partition_key_column(state.files, state.partition_columns).to_pylist()
    paths = state.files.column("path").to_pylist()
    purged = {k for k, p in zip(keys, paths) if deleted.get(p)}
    rest = [p for k, p in zip(keys, paths) if k in purged and not deleted.get(p)]
    return files_with_extra_columns(where, rest, facts.schema_json, state.properties)
