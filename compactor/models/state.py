"""Table state: what the planner needs to know about a table, as plain data.

The live file list is one pyarrow Table, never one Python object per file, so that a table with a
million files plans in bounded memory. Planner tests build states from plain lists with ``files_table``.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from functools import cached_property
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:  # pragma: no cover - loading a plan loads its formats' words (formats/*/actions.py), which
    # load this model before the command decides how pyarrow loads (compactor/runtime/pyarrow_numpy.py)
    import pyarrow as pa

#: columns of ``TableState.files``; partition values follow as "partition.<col>" (string, nullable)
FILE_COLUMNS = ("path", "size_bytes", "modification_time", "num_records")


@dataclass(frozen=True)
class TableState:
    """A snapshot of one table at one version, as its format read it.

    files: path (as the format's log names the file: relative to the table root, decoded, or as its
    manifest lists it), size_bytes (int64), modification_time (int64 ms since epoch), num_records (int64,
    null when unknown), then ``partition.<col>`` string columns, one per partition column, in the order the
    format's log lists the files. An optional ``deleted_rows`` (int64) counts the rows of a file its
    format marks deleted without rewriting it (readers do not see them); a format may add columns of its
    own after them.
    """

    uri: str
    #: the registered format that read it (compactor/models/formats.py)
    format: str
    version: int | None
    partition_columns: tuple[str, ...]
    files: pa.Table
    properties: Mapping[str, str] = field(default_factory=dict)
    #: what the format knows beside the files, typed by the format (its own facts class in its folder
    #: under formats/); None when nothing is known
    extra: object = None
    #: the table's identity as its log states it; None when the format has none
    table_id: str | None = None

    @cached_property
    def paths(self) -> frozenset[str]:
        """Every live path (built once per snapshot; preconditions and re-checks look paths up here)."""
        return frozenset(self.files.column("path").to_pylist())

    @property
    def file_count(self) -> int:
        return int(self.files.num_rows)

    @property
    def total_bytes(self) -> int:
        if self.files.num_rows == 0:
            return 0
        import pyarrow.compute as pc  # here, not at the top: an apply never loads it (tests/cli/test_lean_imports.py)

        return int(pc.sum(self.files.column("size_bytes")).as_py() or 0)


def files_table(
    rows: Sequence[Mapping[str, Any]], partition_columns: Sequence[str] = ()
) -> pa.Table:
    """Build a ``TableState.files`` table from dicts (path, size_bytes, modification_time,
    num_records, and partition values either as ``partition: {col: value}`` or ``partition.<col>``)."""
    import pyarrow as pa

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

