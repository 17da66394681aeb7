"""Table maintenance: VACUUM (delta-spark when its SQL is available, else delta-rs) and table properties."""


from __future__ import annotations

import logging
from collections.abc import Sequence
from typing import Any

from compactor.errors import (
    ApplyError,
)
from compactor.formats.base import ActionContext, ActionOutcome
from compactor.formats.delta.context import SqlEngine, check_writable, fence, handle
from compactor.formats.delta.state import present, stored_files, stored_names, stored_objects
from compactor.models.results import ActionDetails
from compactor.planning.actions import (
    SetPropertiesAction,
    VacuumAction,
)
from compactor.planning.retention import DELETED, parse_interval
from compactor.runtime.faults import crash_point

log = logging.getLogger(__name__)


def vacuum(action: VacuumAction, ctx: ActionContext) -> ActionOutcome:
    """VACUUM the table at the plan's retention. With ``dry_run_first`` (the default) the files it would
    delete are listed first, and nothing is deleted unless every one is in the reviewed plan's list
    (``unreviewed``); the delete then takes no file that list did not hold (delta-spark: the delete is
    given the listed files as its inventory; delta-rs lists the table again as it deletes, so the files it
    deleted are checked against the list after, an error naming any other)."""
    dt = handle(ctx)
    hours = int(action.retention_hours)
    # the state, not the handle: in a dry run, a set_properties planned before this action has not run
    declared = parse_interval(ctx.state.properties.get(DELETED))
    table_secs = 7 * 86400 if declared is None else declared  # Delta's default; 0 is a valid value
    if hours * 3600 < table_secs:
        # never below what the table declares (delta-rs would refuse too; say why clearly)
        raise ApplyError(f"vacuum retention {hours}h is below the table's {DELETED} ({table_secs // 3600}h)",
                         hint="apply the set_properties action first or raise the policy's retention")
    if action.dry_run_first and action.files is None:
        raise ApplyError("retention.vacuum.dry_run_first is on, but the plan does not list the files this VACUUM "
                         "would delete (they could not be listed when it was planned); nothing was deleted",
                         hint="re-run `compactor plan`, or set retention.vacuum.dry_run_first: false to vacuum "
                              "without a reviewed list")
    engine: Any = ctx.engine() if ctx.target.engine == "spark" else None
    if isinstance(engine, SqlEngine) and engine.delta_sql_available() \
            and engine.native_commits_safe(ctx.table.path):
        return _vacuum_with_spark(action, ctx, engine, hours)
    check_writable(ctx)
    # checked above against the (possibly simulated) table property; delta-rs would check the stored one
    root = ctx.location.uri
    listed: tuple[str, ...] | None = None
    gone: set[str] = set()  # named by an expired tombstone, already deleted (not counted, not reviewed)
    if action.dry_run_first or ctx.dry_run:
        named = stored_files(dt.vacuum(retention_hours=hours, dry_run=True, enforce_retention_duration=False,
                                       full=True), root)
        listed = present(named, ctx.location)
        gone = set(named) - set(listed)
        if action.dry_run_first:
            unreviewed("VACUUM would now delete", listed, action)
        crash_point("delta.vacuum_listed")
    if ctx.dry_run:
        files = listed or ()
    else:
        fence(ctx)
        # on the log as it is now: a full VACUUM on an older snapshot would take a file committed since,
        # written before the horizon, for one the log never named
        dt = handle(ctx)
        files = tuple(f for f in stored_files(dt.vacuum(retention_hours=hours, dry_run=False,
                                                        enforce_retention_duration=True, full=True), root)
                      if f not in gone)
        if action.dry_run_first:
            unreviewed("VACUUM deleted", files, action, after=True)
    return ActionOutcome(files_removed=0 if ctx.dry_run else len(files), version_before=ctx.state.version,
                         version_after=dt.version(),
                         details=ActionDetails(dry_run=ctx.dry_run, files=sorted(files)[:1000], file_count=len(files)))


def _vacuum_with_spark(action: VacuumAction, ctx: ActionContext, engine: SqlEngine, hours: int) -> ActionOutcome:
    """delta-spark's VACUUM: its dry run lists the files (it names them only in a dry run), then the delete
    considers exactly those (``USING INVENTORY``, with each one's size and modification time from
    storage): it cannot take a file that grew old enough, or was removed, after the listing (delta-spark's
    retention is whole hours, so no horizon could be kept by the retention alone). Delta still reads the
    log at the delete and keeps any listed file a commit since references again. What it deleted: the
    listed files no longer on storage after it."""
    path = engine.hadoop_path(ctx.table.path)
    names = stored_names(engine.vacuum_listing(path, hours), path)
    on_store = stored_objects(tuple(names), ctx.location)  # a listed folder is no file to delete
    candidates = tuple(sorted(on_store))
    if action.dry_run_first:
        unreviewed("VACUUM would now delete", candidates, action)
    crash_point("delta.vacuum_listed")
    deleted = candidates
    if not ctx.dry_run and candidates:
        fence(ctx)
        engine.vacuum_files(path, hours, [(names[f], on_store[f].size, on_store[f].mtime) for f in candidates])
        kept = set(present(candidates, ctx.location))
        deleted = tuple(f for f in candidates if f not in kept)
        if kept:
            log.info("VACUUM kept %d listed file(s): referenced again by a commit since the listing, or not old "
                     "enough by the driver's clock", len(kept))
    return ActionOutcome(files_removed=0 if ctx.dry_run else len(deleted), version_before=ctx.state.version,
                         version_after=handle(ctx).version(),
                         details=ActionDetails(dry_run=ctx.dry_run, files=list(deleted)[:1000],
                                               file_count=len(deleted), engine="delta-spark"))


def unreviewed(what: str, files: Sequence[str], action: VacuumAction, *, after: bool = False) -> None:
    """Raise ApplyError naming the files in ``files`` that the reviewed plan's list does not hold."""
    planned = set(action.files or ())
    extra = sorted(f for f in files if f not in planned)
    if not extra:
        return
    shown = ", ".join(extra[:5]) + (", ..." if len(extra) > 5 else "")
    if after:  # became old enough between the listing and the delete (delta-rs' retention is whole hours)
        raise ApplyError(f"{what} {len(extra)} file(s) the reviewed plan did not list ({shown}): they became "
                         f"old enough to delete after apply listed them; every one was unreferenced by the log",
                         hint="nothing to undo: the log references none of them; plan again before the next vacuum")
    raise ApplyError(f"{what} {len(extra)} file(s) the reviewed plan did not list ({shown}); nothing was deleted",
                     hint="re-run `compactor plan` to review them (retention.vacuum.dry_run_first is on)")


def set_properties(action: SetPropertiesAction, ctx: ActionContext) -> ActionOutcome:
    check_writable(ctx)
    dt = handle(ctx)
    before = dt.version()
    props = {k: str(v) for k, v in action.properties.items()}
    if not ctx.dry_run:
        fence(ctx)
        dt.alter.set_table_properties(props, raise_if_not_exists=False)
    return ActionOutcome(version_before=before, version_after=handle(ctx).version(),
                         details=ActionDetails(properties=props, dry_run=ctx.dry_run))
