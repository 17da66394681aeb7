"""Delta statistics (numRecords, minValues, maxValues, nullCount) from a parquet file's footer."""

from __future__ import annotations

import datetime as dt
import decimal
import json
import re
from collections.abc import Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq

MAX_STRING_STAT = 32  # Delta truncates string stats too (dataSkippingStringPrefixLength)
_RAW = "\u0000exact:"
_RAW_RE = re.compile(r'"\\u0000exact:([-+0-9.eE]+)"')


class _ExactNumber(str):
    """A number written into the stats JSON as its exact decimal digits (not through float)."""

    def __new__(cls, value: decimal.Decimal) -> _ExactNumber:
        return super().__new__(cls, _RAW + str(value))


def stats_json(stats: Mapping[str, Any]) -> str:
    """json.dumps, with _ExactNumber values written as bare JSON numbers."""
    return _RAW_RE.sub(lambda m: m.group(1), json.dumps(stats))


def _json_value(value: Any, typ: pa.DataType, upper: bool = False) -> Any:
    if value is None:
        return None
    if pa.types.is_timestamp(typ):
        if isinstance(value, dt.datetime):
            if value.tzinfo is not None:
                value = value.astimezone(dt.UTC).replace(tzinfo=None)
            # Delta writers (delta-spark, delta-rs) keep milliseconds; a max cut down to the
            # millisecond would be below the real max and let readers skip a matching file, so it
            # is rounded up instead
            if upper and value.microsecond % 1000:
                value += dt.timedelta(microseconds=1000 - value.microsecond % 1000)
            return value.isoformat(timespec="milliseconds") + "Z"
        return None
    if pa.types.is_date(typ):
        return value.isoformat() if isinstance(value, dt.date) else None
    if isinstance(value, decimal.Decimal):
        # exactly as delta-spark writes it: a JSON number with every digit (float() would round
        # 1.000000000000000001 to 1.0, below the real max: readers would skip a matching file)
        return _ExactNumber(value) if value.is_finite() else None
    if isinstance(value, bytes):
        return None
    if isinstance(value, float) and value != value:  # NaN has no order
        return None
    return value


def footer_rows(locations: Sequence[str], storage_options: Mapping[str, str] | None = None) -> int:
    """Sum of the row counts in the footers of ``locations`` (read in parallel: on object stores each is
    a request)."""
    from compactor.runtime.paths import filesystem

    def rows(location: str) -> int:
        fs, path = filesystem(location, storage_options)
        return pq.ParquetFile(path, filesystem=fs).metadata.num_rows

    if len(locations) <= 4:
        return sum(map(rows, locations))
    with ThreadPoolExecutor(max_workers=8, thread_name_prefix="footers") as pool:
        return sum(pool.map(rows, locations))


def footer_stats(path: str, filesystem: Any = None) -> tuple[int, str]:
    """(num_rows, Delta stats JSON) for top-level primitive columns, combined over row groups."""
    pf = pq.ParquetFile(path, filesystem=filesystem) if filesystem is not None else pq.ParquetFile(path)
    md = pf.metadata
    schema = pf.schema_arrow
    mins: dict[str, Any] = {}
    maxs: dict[str, Any] = {}
    nulls: dict[str, int] = {}
    leaf_index = {md.schema.column(i).path: i for i in range(md.num_columns)}
    for field in schema:
        if pa.types.is_nested(field.type) or field.name not in leaf_index:
            continue
        j = leaf_index[field.name]
        lo = hi = None
        n_null = 0
        exact = True
        for rg in range(md.num_row_groups):
            st = md.row_group(rg).column(j).statistics
            if st is None:
                exact = False
                continue
            n_null += st.null_count if st.has_null_count else 0
            if st.has_min_max:
                lo = st.min if lo is None or (st.min is not None and st.min < lo) else lo
                hi = st.max if hi is None or (st.max is not None and st.max > hi) else hi
        nulls[field.name] = n_null
        if not exact:
            continue
        jl, jh = _json_value(lo, field.type), _json_value(hi, field.type, upper=True)
        if isinstance(jl, str) and not isinstance(jl, _ExactNumber) and pa.types.is_string(field.type):
            if len(jl) > MAX_STRING_STAT:
                jl = jl[:MAX_STRING_STAT]
            if len(jh) > MAX_STRING_STAT:
                continue  # a truncated max would be wrong (too small); leave it out
        if jl is not None and jh is not None:
            mins[field.name], maxs[field.name] = jl, jh
    stats = {"numRecords": md.num_rows, "minValues": mins, "maxValues": maxs, "nullCount": nulls}
    return md.num_rows, stats_json(stats)


def check_written_schema(path: str, expected: pa.Schema, filesystem: Any = None) -> None:
    """The rewritten file must carry exactly the table's data columns, with no INT96 timestamps."""
    pf = pq.ParquetFile(path, filesystem=filesystem) if filesystem is not None else pq.ParquetFile(path)
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
