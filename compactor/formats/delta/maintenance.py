"""Table maintenance: VACUUM (delta-spark when its SQL is available, else delta-rs' dry run and compactor's own
delete of what it listed) and table properties."""


from __future__ import annotations

import logging
from collections.abc import Sequence
from typing import Any

from compactor.errors import (
    ApplyError,
)
from compactor.formats.base import ActionContext, ActionOutcome
from compactor.formats.delta.context import SqlEngine, check_writable, fence, handle
from compactor.formats.delta.log import commits_after
from compactor.formats.delta.state import present, stored_names, stored_objects, vacuum_listing
from compactor.models.results import ActionDetails
from compactor.planning.actions import (
    SetPropertiesAction,
    VacuumAction,
)
from compactor.planning.retention import DELETED, parse_interval
from compactor.runtime.faults import crash_point
from compactor.runtime.storage import storage_for

log = logging.getLogger(__name__)


def vacuum(action: VacuumAction, ctx: ActionContext) -> ActionOutcome:
    """VACUUM the table at the plan's retention: the files it would delete are listed (a dry run), and
    only listed files are deleted. With ``dry_run_first`` (the default) nothing is deleted unless every
    listed file is in the reviewed plan's list (``unreviewed``). delta-spark's VACUUM is given the listed
    files as its inventory; without it, compactor deletes them itself (``_delete_listed``)."""
    dt = handle(ctx)
    hours = int(action.retention_hours)
    # the state, not the handle: in a dry run, a set_properties planned before this action has not run
    _refuse_below_table_retention(hours, ctx.state.properties.get(DELETED))
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
    listed_at = dt.version()
    # the retention was checked above against the (possibly simulated) table property
    listed = vacuum_listing(dt, ctx.location, hours)
    if action.dry_run_first:
        unreviewed("VACUUM would now delete", listed, action)
    crash_point("delta.vacuum_listed")
    files = listed if ctx.dry_run else _delete_listed(ctx, hours, listed, listed_at)
    return ActionOutcome(files_removed=0 if ctx.dry_run else len(files), version_before=ctx.state.version,
                         version_after=handle(ctx).version(),
                         details=ActionDetails(dry_run=ctx.dry_run, files=sorted(files)[:1000], file_count=len(files)))


def _delete_listed(ctx: ActionContext, hours: int, listed: tuple[str, ...], listed_at: int) -> tuple[str, ...]:
    """Delete the listed files, but none a commit after ``listed_at`` (the listing's snapshot) added or
    removed: re-added (RESTORE, or a writer's file committed after it was written) it is live; removed again,
    its tombstone is new. A VACUUM of delta-rs' own would list the table again as it deletes and take what
    grew old enough since the listing, which nobody reviewed. Returns what was deleted."""
    fence(ctx)
    # the table's retention as stored now (delta-rs' VACUUM would check it): raised since the plan, refused
    _refuse_below_table_retention(hours, handle(ctx).metadata().configuration.get(DELETED))
    wanted = set(listed)
    touched = {p for c in commits_after(ctx.location, listed_at)
               for p in wanted.intersection(c.adds.keys() | c.removes.keys())}
    files = tuple(f for f in listed if f not in touched)
    storage_for(ctx.location.uri, ctx.location.storage_options).delete_many(files)
    if touched:
        log.info("VACUUM kept %d listed file(s) a commit since the listing added or removed", len(touched))
    return files


def _refuse_below_table_retention(hours: int, declared: str | None) -> None:
    """Never below what the table declares (delta-rs and delta-spark refuse too; say why clearly)."""
    seconds = parse_interval(declared)
    table_secs = 7 * 86400 if seconds is None else seconds  # Delta's default; 0 is a valid value
    if hours * 3600 < table_secs:
        raise ApplyError(f"vacuum retention {hours}h is below the table's {DELETED} ({table_secs // 3600}h)",
                         hint="apply the set_properties action first or raise the policy's retention")


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


def unreviewed(what: str, files: Sequence[str], action: VacuumAction) -> None:
    """Raise ApplyError naming the files in ``files`` that the reviewed plan's list does not hold."""
    planned = set(action.files or ())
    extra = sorted(f for f in files if f not in planned)
    if not extra:
        return
    shown = ", ".join(extra[:5]) + (", ..." if len(extra) > 5 else "")
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
