"""Delta statistics (numRecords, minValues, maxValues, nullCount) from a file's footer facts
(engines/footer_facts.py), written as Delta writers write them: the JSON of an add action's ``stats``."""

from __future__ import annotations

import datetime as dt
import decimal
import json
import re
from collections.abc import Mapping
from typing import Any

import pyarrow as pa

from compactor.engines.footer_facts import FooterFacts, read_footer_facts

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


def delta_stats(facts: FooterFacts) -> str:
    """Delta stats JSON for the file's top-level primitive columns: every null count; a min and max only
    where every row group has statistics, and a string's only where its max fits the prefix Delta keeps."""
    mins: dict[str, Any] = {}
    maxs: dict[str, Any] = {}
    nulls: dict[str, int] = {}
    for column in facts.columns:
        if not column.top_level:
            continue
        name = column.path[0]
        nulls[name] = column.nulls
        if not column.exact:
            continue
        jl, jh = _json_value(column.min, column.type), _json_value(column.max, column.type, upper=True)
        if isinstance(jl, str) and not isinstance(jl, _ExactNumber) and pa.types.is_string(column.type):
            if len(jl) > MAX_STRING_STAT:
                jl = jl[:MAX_STRING_STAT]
            if len(jh) > MAX_STRING_STAT:
                continue  # a truncated max would be wrong (too small); leave it out
        if jl is not None and jh is not None:
            mins[name], maxs[name] = jl, jh
    stats = {"numRecords": facts.rows, "minValues": mins, "maxValues": maxs, "nullCount": nulls}
    return stats_json(stats)


def footer_stats(path: str, filesystem: Any = None) -> tuple[int, str]:
    """(num_rows, Delta stats JSON) of the file at ``path``."""
    facts = read_footer_facts(path, filesystem)
    return facts.rows, delta_stats(facts)
