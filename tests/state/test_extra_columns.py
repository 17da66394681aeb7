"""The files REORG ... APPLY (PURGE) rewrites for their columns (read/extra_columns.py follows delta-spark's
ReorgTableHelper.fileHasExtraColumns): a field of the file, at any depth, that the table's physical schema
lacks, compared case-insensitively, row tracking's materialized columns excepted; read from real footers."""

from __future__ import annotations

import json
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq

from compactor.formats.delta.read.extra_columns import extra_columns, files_with_extra_columns, table_paths
from compactor.models.table import TableLocation


def _field(name: str, kind: object, physical: str | None = None) -> dict[str, object]:
    meta = {"delta.columnMapping.physicalName": physical} if physical else {}
    return {"name": name, "type": kind, "nullable": True, "metadata": meta}


SCHEMA = json.dumps({"type": "struct", "fields": [
    _field("id", "long", "col-a"),
    _field("Part", "integer", "col-p"),
    _field("s", {"type": "struct", "fields": [_field("x", "string", "col-x")]}, "col-s"),
    _field("tags", {"type": "array", "elementType": {"type": "struct", "fields": [_field("k", "string", "col-k")]},
                    "containsNull": True}, "col-t"),
    _field("m", {"type": "map", "keyType": "string", "valueType": "long", "valueContainsNull": True}, "col-m"),
]})


def test_a_file_with_only_the_tables_columns_has_none() -> None:
    known = table_paths(SCHEMA, mapped=False)
    file = pa.schema([("ID", pa.int64()), ("s", pa.struct([("x", pa.string())])),
                      ("tags", pa.list_(pa.field("element", pa.struct([("k", pa.string())])))),
                      ("m", pa.map_(pa.string(), pa.int64())), ("part", pa.int32())])
    assert extra_columns(file, known) == ()  # case-insensitive; a partition column stored in the file is known


def test_change_data_columns_dropped_and_nested_fields_are_extra() -> None:
    known = table_paths(SCHEMA, mapped=False)
    file = pa.schema([("id", pa.int64()), ("_change_type", pa.string()), ("__is_cdc", pa.bool_()),
                      ("s", pa.struct([("x", pa.string()), ("gone", pa.int32())])),
                      ("tags", pa.list_(pa.struct([("k", pa.string()), ("old", pa.string())])))])
    assert extra_columns(file, known) == ("_change_type", "__is_cdc", "s.gone", "tags.element.old")


def test_under_column_mapping_files_are_read_by_physical_names() -> None:
    known = table_paths(SCHEMA, mapped=True)
    assert extra_columns(pa.schema([("col-a", pa.int64()), ("col-s", pa.struct([("col-x", pa.string())]))]),
                         known) == ()
    # a column dropped from the table: its physical name is in the file only; a logical name is not physical
    assert extra_columns(pa.schema([("col-a", pa.int64()), ("col-dropped", pa.string()), ("id", pa.int64())]),
                         known) == ("col-dropped", "id")
    # row tracking's materialized columns are kept though the schema does not name them
    assert extra_columns(pa.schema([("col-a", pa.int64()), ("_row-id-col-1", pa.int64())]), known,
                         ["_row-id-col-1"]) == ()


def test_footers_are_read_from_storage(tmp_path: Path) -> None:
    pq.write_table(pa.table({"id": [1], "_change_type": pa.array([None], pa.string())}), tmp_path / "a.parquet")
    pq.write_table(pa.table({"id": [2]}), tmp_path / "b.parquet")
    found = files_with_extra_columns(TableLocation(str(tmp_path)), ["a.parquet", "b.parquet"], SCHEMA, {})
    assert found == {"a.parquet": ("_change_type",)}
