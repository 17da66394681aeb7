"""Table state: what the planner needs to know about a table, as plain data.

The live file list is one pyarrow Table, never one Python object per file, so that a table with a
million files plans in bounded memory. Planner tests build states from plain lists with ``files_table``.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from functools import cached_property
from typing import Any

import pyarrow as pa

#: columns of ``TableState.files``; partition values follow as "partition.<col>" (string, nullable)
FILE_COLUMNS = ("path", "size_bytes", "modification_time", "num_records")


@dataclass(frozen=True)
class Protocol:
    """A Delta table's protocol: the reader and writer versions and the table features it requires."""

    min_reader_version: int = 1
    min_writer_version: int = 2
    reader_features: tuple[str, ...] = ()
    writer_features: tuple[str, ...] = ()


@dataclass(frozen=True)
class TableState:
    """A snapshot of one table (Delta table or file-sink output) at one version.

    files: path (relative to the table root for Delta, decoded: the file's location, and the form commits
    take; as listed in the manifest for sinks),
    size_bytes (int64), modification_time (int64 ms since epoch), num_records (int64, null when
    unknown), then ``partition.<col>`` string columns, one per partition column. For Delta tables the
    row order is log order (the order delta-rs' own optimize sees).
    """

    uri: str
    format: str  # "delta" | "spark_file_sink"
    version: int | None
    partition_columns: tuple[str, ...]
    files: pa.Table
    properties: Mapping[str, str] = field(default_factory=dict)
    protocol: Protocol = field(default_factory=Protocol)
    #: Delta schema as JSON (metadata.schemaString), for engines that must write the same schema
    schema_json: str | None = None
    #: the files a VACUUM at the policy's retention would delete now (relative to the table root as stored,
    #: sorted), None when they could not be listed
    vacuum_candidates: tuple[str, ...] | None = None
    #: what the format knows beside the files, typed by the format (formats/delta/facts.py DeltaFacts,
    #: formats/file_sink/state.py SinkFacts); None when nothing is known
    extra: object = None
    #: the table's identity as its log states it (Delta: metaData.id); None when the format has none
    table_id: str | None = None

    @cached_property
    def paths(self) -> frozenset[str]:
        """Every live path (built once per snapshot; preconditions and re-checks look paths up here)."""
        return frozenset(self.files.column("path").to_pylist())

    @property
    def file_count(self) -> int:
        return self.files.num_rows

    @property
    def total_bytes(self) -> int:
        if self.files.num_rows == 0:
            return 0
        import pyarrow.compute as pc  # here, not at the top: an apply never loads it (compactor/formats/delta/state.py)

        return int(pc.sum(self.files.column("size_bytes")).as_py() or 0)


def files_table(
    rows: Sequence[Mapping[str, Any]], partition_columns: Sequence[str] = ()
) -> pa.Table:
    """Build a ``TableState.files`` table from dicts (path, size_bytes, modification_time,
    num_records, and partition values either as ``partition: {col: value}`` or ``partition.<col>``)."""
    cols: dict[str, list[Any]] = {c: [] for c in FILE_COLUMNS}
    pcols: dict[str, list[Any]] = {f"partition.{c}": [] for c in partition_columns}
    for r in rows:
        cols["path"].append(r["path"])
        cols["size_bytes"].append(int(r["size_bytes"]))
        cols["modification_time"].append(int(r.get("modification_time", 0)))
        cols["num_records"].append(r.get("num_records"))
        pv = r.get("partition") or {}
        for c in partition_columns:
            v = pv.get(c, r.get(f"partition.{c}"))
            pcols[f"partition.{c}"].append(None if v is None else str(v))
    schema = pa.schema(
        [("path", pa.string()), ("size_bytes", pa.int64()), ("modification_time", pa.int64()),
         ("num_records", pa.int64())] + [(k, pa.string()) for k in pcols]
    )
    return pa.table({**cols, **pcols}, schema=schema)

