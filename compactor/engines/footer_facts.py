"""What a parquet file's footer says of it, in no table format's terms: its rows, and per leaf column (by
its path and parquet field id) the null count and the min and max its row groups state. Each table format
turns these into its own statistics; the engines also check the files they write against the table's
schema here (``check_written_schema``)."""

from __future__ import annotations

from collections.abc import Iterator, Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq

#: where pyarrow keeps a parquet field id in an arrow field's metadata
FIELD_ID = b"PARQUET:field_id"


@dataclass(frozen=True)
class ColumnFacts:
    """One leaf column of a file, combined over its row groups."""

    #: the names from the top-level field down to the leaf, as the file's arrow schema names them
    path: tuple[str, ...]
    #: the parquet field id, where the writer set one
    field_id: int | None
    #: the column's type as the file's arrow schema gives it
    type: pa.DataType
    #: nulls, summed over the row groups that count them
    nulls: int
    #: the least min and the greatest max the row groups state (None: none states one); values as pyarrow
    #: decodes them (int, Decimal, datetime, str, bytes, ...)
    min: Any
    max: Any
    #: every row group has statistics for the column; False: min and max bound only the row groups that do
    exact: bool

    @property
    def top_level(self) -> bool:
        """A column of the table's own (not a field inside a struct, list or map)."""
        return len(self.path) == 1 and not pa.types.is_nested(self.type)


@dataclass(frozen=True)
class FooterFacts:
    """A file's rows and its leaf columns' facts, in the file's column order."""

    rows: int
    columns: tuple[ColumnFacts, ...]


def _leaves(field: pa.Field, prefix: tuple[str, ...]) -> Iterator[tuple[tuple[str, ...], pa.Field]]:
    """The leaf fields under ``field``, depth first: the order of the parquet file's leaf columns."""
    path = (*prefix, field.name)
    t = field.type
    if pa.types.is_struct(t):
        for i in range(t.num_fields):
            yield from _leaves(t.field(i), path)
    elif pa.types.is_map(t):
        yield from _leaves(t.key_field, path)
        yield from _leaves(t.item_field, path)
    elif pa.types.is_list(t) or pa.types.is_large_list(t) or pa.types.is_fixed_size_list(t):
        yield from _leaves(t.value_field, path)
    else:
        yield path, field


def _field_id(field: pa.Field) -> int | None:
    raw = (field.metadata or {}).get(FIELD_ID)
    try:
        return int(raw) if raw is not None else None
    except ValueError:
        return None


def footer_facts(md: pq.FileMetaData, schema: pa.Schema) -> FooterFacts:
    """The facts of one file from its footer ``md`` and its arrow schema."""
    leaves = [leaf for f in schema for leaf in _leaves(f, ())]
    if len(leaves) != md.num_columns:  # a layout this mapping does not know: the top-level columns alone
        by_path = {md.schema.column(i).path: i for i in range(md.num_columns)}
        pairs: list[tuple[int, tuple[str, ...], pa.Field]] = [
            (by_path[f.name], (f.name,), f) for f in schema if f.name in by_path]
    else:
        pairs = [(i, path, f) for i, (path, f) in enumerate(leaves)]
    groups = [md.row_group(rg) for rg in range(md.num_row_groups)]
    columns = []
    for j, path, field in pairs:
        lo = hi = None
        nulls = 0
        exact = True
        for group in groups:
            st = group.column(j).statistics
            if st is None:
                exact = False
                continue
            nulls += st.null_count if st.has_null_count else 0
            if st.has_min_max:
                lo = st.min if lo is None or (st.min is not None and st.min < lo) else lo
                hi = st.max if hi is None or (st.max is not None and st.max > hi) else hi
        columns.append(ColumnFacts(path, _field_id(field), field.type, nulls, lo, hi, exact))
    return FooterFacts(md.num_rows, tuple(columns))


def read_footer_facts(path: str, filesystem: Any = None) -> FooterFacts:
    """The facts of the file at ``path`` (in ``filesystem``; None: a local path)."""
    pf = pq.ParquetFile(path, filesystem=filesystem) if filesystem is not None else pq.ParquetFile(path)
    return footer_facts(pf.metadata, pf.schema_arrow)


def footer_rows(locations: Sequence[str], storage_options: Mapping[str, str] | None = None) -> int:
    """Sum of the row counts in the footers of ``locations`` (read in parallel: on object stores each is
    a request)."""
    from compactor.runtime.paths import filesystem

    def rows(location: str) -> int:
        fs, path = filesystem(location, storage_options)
        return int(pq.ParquetFile(path, filesystem=fs).metadata.num_rows)

    if len(locations) <= 4:
        return sum(map(rows, locations))
    with ThreadPoolExecutor(max_workers=8, thread_name_prefix="footers") as pool:
        return sum(pool.map(rows, locations))


def check_written_schema(path: str, expected: pa.Schema, filesystem: Any = None) -> None:
    """The rewritten file must carry exactly the table's data columns, with no INT96 timestamps."""
    pf = pq.ParquetFile(path, filesystem=filesystem) if filesystem is not None else pq.ParquetFile(path)
    check_written(pf, expected, path)


def check_written(pf: pq.ParquetFile, expected: pa.Schema, path: str) -> None:
    """``check_written_schema`` of a file already open."""
    for i in range(pf.metadata.num_columns):
        if pf.metadata.schema.column(i).physical_type == "INT96":
            raise ValueError(f"{path}: column {pf.metadata.schema.column(i).path} was written as INT96")
    got = [f.name for f in pf.schema_arrow]
    want = [f.name for f in expected]
    if got != want:
        raise ValueError(f"{path}: columns {got} differ from the table's data columns {want}")
    for f in pf.schema_arrow:
        e = expected.field(f.name)
        if pa.types.is_timestamp(e.type) and not (pa.types.is_timestamp(f.type) and f.type.unit == "us"):
            raise ValueError(f"{path}: column {f.name} is {f.type}, expected microsecond timestamps")
        if pa.types.is_timestamp(e.type) and (e.type.tz is None) != (f.type.tz is None):
            # a timestamp without time zone written UTC-adjusted (or the reverse) reads as another type
            raise ValueError(f"{path}: column {f.name} is {f.type}, expected {e.type} (with"
                             f"{'out' if e.type.tz is None else ''} a time zone)")
