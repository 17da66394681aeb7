"""Retention drift: declared retention vs the table's properties -> set_properties and vacuum actions."""

from __future__ import annotations

import re

from compactor.models.state import TableState
from compactor.planning.actions import Action, Precondition, SetPropertiesAction, VacuumAction
from compactor.planning.plan import Skip, SkipReason
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


def plan_retention(retention: Retention, state: TableState,
                   listed: tuple[str, ...] | None) -> tuple[list[Action], list[Skip]]:
    """``listed``: the files a VACUUM at the policy's retention would delete now (None: not listed)."""
    actions: list[Action] = []
    skips: list[Skip] = []
    wanted = {DELETED: retention.deleted_file_retention}
    if retention.log_retention is not None:
        wanted[LOG] = retention.log_retention
    changes: dict[str, str] = {}
    current: dict[str, str | None] = {}
    for key, secs in wanted.items():
        have = parse_interval(state.properties.get(key))
        effective = have if have is not None else DEFAULTS[key]
        if have is None and secs == DEFAULTS[key]:
            continue  # the default already is what the policy declares
        if effective != secs:
            changes[key] = format_interval(secs)
            current[key] = state.properties.get(key)
    if changes and retention.manage_properties:
        actions.append(SetPropertiesAction(
            precondition=Precondition.of(state.version, ()), properties=changes, current=current,
            reason="table properties drift from the declared retention",
        ))
    elif not changes:
        skips.append(Skip(SkipReason.RETENTION_IN_SYNC, None, {k: state.properties.get(k) for k in wanted},
                          "table properties match the declared retention"))
    if retention.vacuum.enabled and listed == () and not changes:
        # converged: a table that needs nothing gets no action (plan --detailed-exitcode 0); a plan that
        # changes the retention properties keeps its vacuum (it runs under the new retention)
        skips.append(Skip(SkipReason.NOTHING_TO_VACUUM, None, {}, "a VACUUM now would delete no file"))
    elif retention.vacuum.enabled:
        hours = vacuum_retention_hours(retention)
        actions.append(VacuumAction(
            precondition=Precondition.of(state.version, listed or ()), retention_hours=hours,
            dry_run_first=retention.vacuum.dry_run_first, files_to_delete=None if listed is None else len(listed),
            files=listed, input_files=len(listed or ()),
            reason=f"delete files removed from the log more than {hours}h ago"
                   + (f" ({len(listed)} file(s) now)" if listed is not None else ""),
        ))
    return actions, skips
