"""What a policy's ``retention:`` means for a Delta table (PURE): the table properties it declares, in
Delta's interval syntax, and the VACUUM horizon (formats/delta/plan/planner.py plans the drift as actions)."""

from __future__ import annotations

import re

from compactor.policy.model import Retention

DELETED = "delta.deletedFileRetentionDuration"
LOG = "delta.logRetentionDuration"
DEFAULTS = {DELETED: 7 * 86400, LOG: 30 * 86400}

_UNITS = {"second": 1, "minute": 60, "hour": 3600, "day": 86400, "week": 7 * 86400}
_INTERVAL = re.compile(r"^\s*(?:interval\s+)?(\d+)\s*(second|minute|hour|day|week)s?\s*$", re.I)


def parse_interval(text: str | None) -> int | None:
    """Seconds from a Delta interval property ('interval 7 days', '168 hours')."""
    if text is None:
        return None
    m = _INTERVAL.match(str(text))
    if not m:
        return None
    return int(m.group(1)) * _UNITS[m.group(2).lower()]


def format_interval(seconds: int) -> str:
    for unit in ("week", "day", "hour", "minute"):
        size = _UNITS[unit]
        if seconds % size == 0 and unit != "week":
            n = seconds // size
            return f"interval {n} {unit}{'s' if n != 1 else ''}"
    return f"interval {seconds} seconds"


def vacuum_retention_hours(retention: Retention) -> int:
    """VACUUM's horizon in whole hours: never below the declared retention nor the slowest reader."""
    hours = max(1, -(-retention.deleted_file_retention // 3600))
    if retention.min_reader_lag is not None:
        hours = max(hours, -(-retention.min_reader_lag // 3600))
    return hours


def declared_properties(retention: Retention) -> dict[str, str]:
    """The table properties a policy's retention declares (as set_properties would write them)."""
    wanted = {DELETED: format_interval(retention.deleted_file_retention)}
    if retention.log_retention is not None:
        wanted[LOG] = format_interval(retention.log_retention)
    return wanted
