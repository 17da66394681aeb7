"""Table maintenance: VACUUM (compactor's own listing and gate; delta-spark's VACUUM when its SQL is available,
else compactor's own delete of what it listed) and table properties."""


from __future__ import annotations

import logging
from collections.abc import Sequence
from typing import Any

from compactor.engines.sql_engine import SqlEngine
from compactor.errors import (
    ApplyError,
)
from compactor.formats.base import ActionContext, ActionOutcome
from compactor.formats.delta.apply.context import check_writable, fence, handle
from compactor.formats.delta.plan.actions import SetPropertiesAction, VacuumAction
from compactor.formats.delta.plan.retention import DELETED, parse_interval
from compactor.formats.delta.read.vacuum_listing import VacuumListing, present, stored_names, vacuum_listing
from compactor.formats.delta.spark import delta_sql_available, native_commits_safe, vacuum_files
from compactor.formats.delta.spark import vacuum_listing as spark_vacuum_listing
from compactor.models.results import ActionDetails
from compactor.runtime.deletion import Deletion, delete_proved
from compactor.runtime.faults import crash_point
from compactor.runtime.storage import storage_for

log = logging.getLogger(__name__)


def vacuum(action: VacuumAction, ctx: ActionContext) -> ActionOutcome:
    """VACUUM the table at the plan's retention. The files it may delete are listed by compactor's own rule
    (formats/delta/read/references.py: its replay of the log and one listing of the table), and only listed files
    are deleted, each proved unreferenced again right before the delete (the gate, runtime/deletion.py). With
    ``dry_run_first`` (the default) nothing is deleted unless every listed file is in the reviewed plan's list
    (``unreviewed``). delta-spark's VACUUM, where it runs, is given as its inventory only the files its own
    dry run names that the gate passes; without it, compactor deletes them itself (``_delete_listed``)."""
    hours = int(action.retention_hours)
    # the state, not the table: in a dry run, a set_properties planned before this action has not run
    _refuse_below_table_retention(hours, ctx.state.properties.get(DELETED))
    if action.dry_run_first and action.files is None:
        raise ApplyError("retention.vacuum.dry_run_first is on, but the plan does not list the files this VACUUM "
                         "would delete (they could not be listed when it was planned); nothing was deleted",
                         hint="re-run `compactor plan`, or set retention.vacuum.dry_run_first: false to vacuum "
                              "without a reviewed list")
    engine: Any = ctx.engine() if ctx.target.engine == "spark" else None
    listing = vacuum_listing(ctx.location, hours)
    if isinstance(engine, SqlEngine) and delta_sql_available(engine) and native_commits_safe(engine, ctx.table.path):
        return _vacuum_with_spark(action, ctx, engine, hours, listing)
    if action.dry_run_first:
        unreviewed("VACUUM would now delete", listing.files, action)
    crash_point("delta.vacuum_listed")
    done = Deletion(deleted=listing.files) if ctx.dry_run else _delete_listed(ctx, hours, listing)
    return _outcome(ctx, done)


def _outcome(ctx: ActionContext, done: Deletion, engine: str | None = None) -> ActionOutcome:
    if done.kept:
        log.info("VACUUM kept %d listed file(s) the table references now (e.g. %s: %s)", len(done.kept),
                 *next(iter(done.kept.items())))
    kept = dict(sorted(done.kept.items())[:1000]) or None
    return ActionOutcome(files_removed=0 if ctx.dry_run else len(done.deleted), version_before=ctx.state.version,
                         version_after=handle(ctx).version(),
                         details=ActionDetails(dry_run=ctx.dry_run, files=sorted(done.deleted)[:1000],
                                               file_count=len(done.deleted), engine=engine, kept=kept))


def _delete_listed(ctx: ActionContext, hours: int, listing: VacuumListing) -> Deletion:
    """Delete the listed files that the gate passes right before the delete: it reads the commits made since
    the listing first (a RESTORE may have made a listed file live again, an optimize given one a new
    tombstone) and keeps every file the table references then. A VACUUM of delta-rs' own would list the
    table again as it deletes and take what grew old enough since the listing, which nobody reviewed."""
    fence(ctx)
    # the table's retention as stored now (delta-rs' VACUUM would check it): raised since the plan, refused
    _refuse_below_table_retention(hours, handle(ctx).metadata().configuration.get(DELETED))
    return delete_proved(storage_for(ctx.location.uri, ctx.location.storage_options), listing.gate, listing.files)


def _refuse_below_table_retention(hours: int, declared: str | None) -> None:
    """Never below what the table declares (delta-rs and delta-spark refuse too; say why clearly)."""
    seconds = parse_interval(declared)
    table_secs = 7 * 86400 if seconds is None else seconds  # Delta's default; 0 is a valid value
    if hours * 3600 < table_secs:
        raise ApplyError(f"vacuum retention {hours}h is below the table's {DELETED} ({table_secs // 3600}h)",
                         hint="apply the set_properties action first or raise the policy's retention")


def _vacuum_with_spark(action: VacuumAction, ctx: ActionContext, engine: SqlEngine, hours: int,
                       listing: VacuumListing) -> ActionOutcome:
    """delta-spark's VACUUM: its dry run names the files it would delete, and the gate judges each (a file
    it keeps is named with the reason, never deleted); the delete then considers exactly the rest (``USING
    INVENTORY``, with each one's size and modification time from compactor's listing): it cannot take a
    file that grew old enough, or was removed, after the listing (delta-spark's retention is whole hours,
    so no horizon could be kept by the retention alone). Delta still reads the log at the delete and keeps
    any listed file a commit since references again. What it deleted: the files no longer on storage after
    it."""
    path = engine.hadoop_path(ctx.table.path)
    names = stored_names(spark_vacuum_listing(engine, path, hours), path)
    kept = dict(listing.gate.kept(tuple(names)))
    for name in names:
        if name not in kept and name not in listing.objects:
            kept[name] = "not a file compactor's listing found deletable on storage"
    candidates = tuple(sorted(n for n in names if n not in kept))
    if action.dry_run_first:
        unreviewed("VACUUM would now delete", candidates, action)
    crash_point("delta.vacuum_listed")
    if ctx.dry_run or not candidates:
        return _outcome(ctx, Deletion(deleted=candidates, kept=kept), "delta-spark")
    fence(ctx)
    on_store = listing.objects
    vacuum_files(engine, path, hours, [(names[f], on_store[f].size, on_store[f].mtime) for f in candidates])
    still = set(present(candidates, ctx.location))
    kept.update({f: "delta-spark kept it: referenced again by a commit since the listing, or not old enough by "
                    "the driver's clock" for f in still})
    return _outcome(ctx, Deletion(deleted=tuple(f for f in candidates if f not in still), kept=kept), "delta-spark")


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
