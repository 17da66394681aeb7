"""Per-column verification of a rewrite from parquet footers (issue 18, finding 2): the output must hold
every column of its inputs with the same null count, and, for types whose footer statistics are exact
(integers, decimals, dates, booleans), the same min and max. Row counts alone let a rewrite that filled a
column with nulls, or dropped one, pass.

Where a bin drops rows of an input (BinInput.drop), a footer says nothing of which values those rows held,
so only the bounds that still hold are checked there: the output's nulls between the inputs' nulls less
the rows dropped and the inputs' nulls, and its min and max within the inputs', reaching those of the
inputs that drop nothing (their rows are all in the output)."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq

from compactor.engines.base import BinJob
from compactor.errors import VerificationError


@dataclass
class ColumnSummary:
    """One column of a file, combined over its row groups' footer statistics (``summarize``)."""

    nulls: int = 0
    lo: Any = None
    hi: Any = None
    #: every row group had statistics with min and max (or only nulls)
    exact: bool = True


def _ordered(t: pa.DataType) -> bool:
    return bool(pa.types.is_integer(t) or pa.types.is_decimal(t) or pa.types.is_date(t) or pa.types.is_boolean(t))


def summarize(md: pq.FileMetaData, schema: pa.Schema) -> dict[str, ColumnSummary]:
    """Top-level primitive columns of one file, combined over its row groups."""
    index = {md.schema.column(i).path: i for i in range(md.num_columns)}
    out: dict[str, ColumnSummary] = {}
    for field in schema:
        j = index.get(field.name)
        if j is None or pa.types.is_nested(field.type):
            continue
        s = ColumnSummary()
        for rg in range(md.num_row_groups):
            st = md.row_group(rg).column(j).statistics
            if st is None or not st.has_null_count:
                s.exact = False
                continue
            s.nulls += st.null_count
            if st.has_min_max:
                s.lo = st.min if s.lo is None or st.min < s.lo else s.lo
                s.hi = st.max if s.hi is None or st.max > s.hi else s.hi
            elif st.null_count != md.row_group(rg).num_rows:
                s.exact = False
        out[field.name] = s
    return out


@dataclass
class _Expected:
    """What the output must hold in one column, from its inputs' footers: nulls within [lo, hi] (equal
    where no input drops rows), min and max within those of all inputs and reaching those of the inputs
    that drop none (``kept_lo``/``kept_hi``: their rows are all in the output)."""

    nulls_lo: int = 0
    nulls_hi: int = 0
    lo: Any = None
    hi: Any = None
    kept_lo: Any = None
    kept_hi: Any = None
    exact: bool = True
    drops: bool = False


def column_problem(inputs: Sequence[tuple[pq.FileMetaData, pa.Schema]], output: pq.FileMetaData,
                   output_schema: pa.Schema, dropped: Sequence[int] = ()) -> str | None:
    """Why the output does not hold its inputs' columns as they were, or None. ``dropped``: per input, the
    rows the rewrite left out (empty: none anywhere). Where an input drops nothing its columns count
    exactly as they are; where it drops rows, its footer bounds what is left: its nulls less the rows
    dropped at least (never below 0), its nulls at most (never above its rows kept), and values within
    its min and max."""
    got = summarize(output, output_schema)
    expected = {f.name: _Expected() for f in output_schema if f.name in got}
    for k, (md, schema) in enumerate(inputs):
        drop = dropped[k] if dropped else 0
        have = summarize(md, schema)
        for name in set(have) - set(got):
            if have[name].nulls < md.num_rows:
                return f"column {name} of an input holds values but the output has no such column"
        for name, e in expected.items():
            h = have.get(name)
            if h is None:  # the file predates the column (schema evolution): its rows are null in it
                e.nulls_lo += md.num_rows - drop
                e.nulls_hi += md.num_rows - drop
                continue
            e.nulls_lo += max(0, h.nulls - drop)
            e.nulls_hi += min(h.nulls, md.num_rows - drop) if drop else h.nulls
            e.exact &= h.exact
            e.drops |= drop > 0
            if h.lo is not None:
                e.lo = h.lo if e.lo is None or h.lo < e.lo else e.lo
                e.hi = h.hi if e.hi is None or h.hi > e.hi else e.hi
                if not drop:
                    e.kept_lo = h.lo if e.kept_lo is None or h.lo < e.kept_lo else e.kept_lo
                    e.kept_hi = h.hi if e.kept_hi is None or h.hi > e.kept_hi else e.kept_hi
    for name, e in expected.items():
        g = got[name]
        if not (e.exact and g.exact):
            continue
        if not e.nulls_lo <= g.nulls <= e.nulls_hi:
            held = f"{e.nulls_lo}" if e.nulls_lo == e.nulls_hi else f"{e.nulls_lo} to {e.nulls_hi} once rows are dropped"
            return f"column {name}: {g.nulls} null(s) written, the inputs hold {held}"
        if not _ordered(output_schema.field(name).type):
            continue
        if not e.drops:
            if (g.lo, g.hi) != (e.lo, e.hi):
                return f"column {name}: min/max {g.lo!r}/{g.hi!r} written, the inputs hold {e.lo!r}/{e.hi!r}"
            continue
        outside = g.lo is not None and (e.lo is None or g.lo < e.lo or g.hi > e.hi)
        short = e.kept_lo is not None and (g.lo is None or g.lo > e.kept_lo or g.hi < e.kept_hi)
        if outside or short:
            return (f"column {name}: min/max {g.lo!r}/{g.hi!r} written; once rows are dropped the inputs hold values "
                    f"within {e.lo!r}/{e.hi!r}, reaching {e.kept_lo!r}/{e.kept_hi!r}")
    return None


def input_footers(locations: Sequence[str], storage_options: Any = None) -> list[tuple[pq.FileMetaData, pa.Schema]]:
    """(footer, file schema) of each input (read in parallel on object stores: one request each)."""
    from concurrent.futures import ThreadPoolExecutor

    from compactor.runtime.paths import filesystem

    def one(location: str) -> tuple[pq.FileMetaData, pa.Schema]:
        fs, path = filesystem(location, storage_options)
        pf = pq.ParquetFile(path, filesystem=fs)
        return pf.metadata, pf.schema_arrow

    if len(locations) <= 4:
        return [one(x) for x in locations]
    with ThreadPoolExecutor(max_workers=8, thread_name_prefix="footers") as pool:
        return list(pool.map(one, locations))


def dropped(md: pq.FileMetaData, file_schema: pa.Schema, job: BinJob) -> tuple[str, ...]:
    """The columns of one input its rewrite leaves out: the partition columns a writer also stored, and the
    job's ignored columns the footer proves hold null or their one value in every row. One that holds
    anything else, or whose footer has no statistics to prove it, raises VerificationError."""
    index = {md.schema.column(i).path: i for i in range(md.num_columns)}
    out = [c for c in job.partition_columns if c in file_schema.names]
    for col in job.ignored:
        j = index.get(col.name)
        if j is None:
            continue
        for rg in range(md.num_row_groups):
            st, rows = md.row_group(rg).column(j).statistics, md.row_group(rg).num_rows
            if st is None or not st.has_null_count:
                raise VerificationError(f"column {col.name} (which readers ignore) has no statistics to prove it "
                                        "holds no data; nothing was committed")
            if st.null_count == rows:
                continue
            if col.value is None or not st.has_min_max or st.min != col.value or st.max != col.value:
                seen = f"{st.min!r}..{st.max!r}" if st.has_min_max else "values"
                raise VerificationError(f"column {col.name} (which readers ignore) holds {seen}, not only "
                                        f"{'null' if col.value is None else repr(col.value)}: refusing to drop it; "
                                        "nothing was committed")
        out.append(col.name)
    return tuple(out)


def rename_problem(file_schema: pa.Schema, schema: pa.Schema, droppable: Sequence[str] = ()) -> str | None:
    """A file that lacks a column of the table's schema and holds one the schema does not know predates a
    rename: filling the new name with nulls would lose the values (engines refuse it)."""
    names = set(schema.names)
    unknown = [n for n in file_schema.names if n not in names and n not in droppable]
    if not unknown:
        return None
    missing = [n for n in schema.names if n not in file_schema.names]
    return (f"the file holds column(s) {', '.join(unknown)} the table's schema does not have"
            + (f" and lacks {', '.join(missing)}" if missing else "") + ": rewriting it would drop values")
