"""Apply an Iceberg table's retention actions through pyiceberg (no JVM), whichever engine the target names:
they edit metadata and delete files, nothing an engine rewrites.

``expire_snapshots``: the table is read again through its catalog and every listed snapshot must still be
there and still expirable by the action's own rule (retention_plan.expirable: older than its horizon, not
the current snapshot, no branch or tag on it, not among the newest ``retain_last`` of the current history);
otherwise the action is ``stale`` and nothing is committed. The expiry is then committed conditionally
(expire.py), after the lease fence. Only then are the listed files deleted, and only those a manifest of an
expired snapshot named (an edited list names nothing else), each through the table's deletion gate
(references.py: it reads the metadata again and keeps any file a snapshot still in it names).

``remove_orphan_files``: each listed file must lie under the table's location and outside its metadata
folder and compactor's state (an edited list names nothing else), must not be named by the journal of a
compactor run that may still be running, and must still be older than the action's horizon (a file
written again since is kept); the rest go through the deletion gate, which keeps whatever a snapshot
references by then (an append that committed one of them meanwhile). A kept file is reported, not an error.

Neither action writes a file, so neither has a journal entry to recover: a run killed between the expiry's
commit and its deletes leaves the files it freed as orphans, which ``remove_orphan_files`` deletes."""

from __future__ import annotations

import logging
from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING

from compactor.errors import ApplyError, UnsupportedTableError
from compactor.formats.base import ActionContext, ActionOutcome
from compactor.formats.iceberg.catalog import open_location
from compactor.formats.iceberg.read import table_root
from compactor.formats.iceberg.references import IcebergReferences
from compactor.formats.iceberg.retention_actions import (
    ExpireSnapshotsAction,
    IcebergRetentionAction,
    RemoveOrphanFilesAction,
)
from compactor.formats.iceberg.retention_facts import RefFact, SnapshotFact
from compactor.formats.iceberg.retention_plan import expirable, expiry_refusal
from compactor.formats.iceberg.retention_read import (
    METADATA_SUFFIXES,
    foreign_metadata,
    hidden_name,
    live_journal,
    metadata_folder,
)
from compactor.models.results import ActionDetails
from compactor.runtime import clock
from compactor.runtime.deletion import Deletion, delete_proved
from compactor.runtime.storage import locate, storage_for

if TYPE_CHECKING:
    from pyiceberg.table import Table
    from pyiceberg.table.metadata import TableMetadata

log = logging.getLogger(__name__)

#: at most this many paths (deleted, kept) in a run record
SHOWN = 1000


def run_retention(action: IcebergRetentionAction, ctx: ActionContext) -> ActionOutcome:
    """Run ``action`` (module docstring)."""
    if isinstance(action, ExpireSnapshotsAction):
        return _expire(action, ctx)
    if isinstance(action, RemoveOrphanFilesAction):
        return _remove_orphans(action, ctx)
    raise ApplyError(f"{action.type} actions are not run on Iceberg tables")


def _expire(action: ExpireSnapshotsAction, ctx: ActionContext) -> ActionOutcome:
    from compactor.formats.iceberg.expire import expire
    from compactor.formats.iceberg.retention_read import snapshot_facts

    location = ctx.location
    table, name = open_location(location)
    refusal = expiry_refusal(int(table.metadata.format_version))
    spark = getattr(ctx.engine(), "spark", None) if refusal is not None and ctx.table.engine == "spark" else None
    if refusal is not None and spark is None:
        raise UnsupportedTableError(f"{name}: {refusal}; nothing was committed")
    before = table.metadata.current_snapshot_id
    ids = sorted(set(action.snapshots))
    snapshots, manifests = snapshot_facts(table)
    named = _named_by(snapshots, manifests, set(ids))
    if ctx.fence is not None:
        ctx.fence()
    if spark is not None:  # a v3 table: Iceberg's own expiry in the session, by id only, deleting nothing
        from compactor.formats.iceberg.spark_expire import expire_in_jvm

        expire_in_jvm(spark, location, table, ids, name, lambda md: _held(md, action), now_ms=int(clock.wall() * 1000))
    else:
        expire(table, ids, name, check=lambda md: _held(md, action))  # stale: nothing committed
    table.refresh()
    left = sorted(set(ids) & {s.snapshot_id for s in table.metadata.snapshots})
    if left:
        raise ApplyError(f"{name}: the expiry committed but snapshot(s) {left} are still in the table's metadata; "
                         "nothing was deleted")
    kept = {p: "no manifest of an expired snapshot names it" for p in action.files if p not in named}
    if ctx.fence is not None:
        ctx.fence()
    done, sizes = _delete(table, [p for p in action.files if p in named], location.storage_options, kept)
    return _outcome(done, sizes, before, table.metadata.current_snapshot_id, snapshots=ids)


def _held(md: TableMetadata, action: ExpireSnapshotsAction) -> list[str]:
    """Why the action's own rule no longer lets its snapshots expire from ``md`` (those still there, not
    current and held by no ref: expire.unexpirable names the others): younger than its horizon, or among the
    newest ``retain_last`` of the current history."""
    snapshots = [SnapshotFact(s.snapshot_id, s.parent_snapshot_id, int(s.timestamp_ms)) for s in md.snapshots]
    refs = [RefFact(n, r.snapshot_id, r.snapshot_ref_type.value) for n, r in md.refs.items()]
    allowed = set(expirable(md.current_snapshot_id, snapshots, refs, horizon_ms=action.horizon_ms,
                            retain_last=action.retain_last))
    present = {s.snapshot_id for s in snapshots}
    held = sorted(i for i in set(action.snapshots) if i in present and i not in allowed
                  and i != md.current_snapshot_id and all(r.snapshot_id != i for r in refs))
    if not held:
        return []
    return [f"snapshot(s) {held} may no longer expire (younger than the plan's horizon, or among the newest "
            f"{action.retain_last} of the current history)"]


def _named_by(snapshots: Sequence[SnapshotFact], manifests: Mapping[str, tuple[tuple[str, int], ...]],
              ids: set[int]) -> set[str]:
    """Every file a manifest of the snapshots ``ids`` names, by an entry of any status."""
    return {path for s in snapshots if s.snapshot_id in ids for m in s.manifests for path, _ in manifests.get(m, ())}


def _remove_orphans(action: RemoveOrphanFilesAction, ctx: ActionContext) -> ActionOutcome:
    location = ctx.location
    options = location.storage_options
    table, name = open_location(location)
    root = table_root(table)
    foreign = foreign_metadata(storage_for(root, options))
    if foreign is not None:
        raise UnsupportedTableError(f"{name}: {foreign}; nothing was deleted")
    base = locate(root, options)[1].rstrip("/")
    meta = metadata_folder(table, root, options)
    journaled, folders = live_journal(root, options)
    kept: dict[str, str] = {}
    candidates = []
    for path in action.files:
        at = locate(path, options)[1]
        rel = at[len(base) + 1:] if at.startswith(base + "/") else None
        if rel is None:
            kept[path] = "not under the table's location"
        elif any(hidden_name(p) or p in (".", "..") for p in rel.split("/")) or rel.endswith(METADATA_SUFFIXES) or (
                meta and (rel == meta or rel.startswith(meta + "/"))):
            kept[path] = "a file of the table's metadata, or a hidden name (compactor's state among them)"
        elif rel in journaled or any(not f or rel == f or rel.startswith(f + "/") for f in folders):
            kept[path] = "a compactor run that may still be running names it in its journal"
        else:
            candidates.append(path)
    if ctx.fence is not None:
        ctx.fence()
    done, sizes = _delete(table, candidates, options, kept, horizon_ms=action.horizon_ms)
    current = table.metadata.current_snapshot_id
    return _outcome(done, sizes, current, current)


def _delete(table: Table, paths: Sequence[str], options: Mapping[str, str], kept: Mapping[str, str], *,
            horizon_ms: int | None = None) -> tuple[Deletion, dict[str, int]]:
    """Delete those of ``paths`` (as planned) still on storage, not modified since ``horizon_ms``, that the
    table's deletion gate passes; ``kept``: planned paths kept already, with why. Returns what was deleted and
    kept, by planned path, and the deleted files' sizes."""
    out_kept = dict(kept)
    if not paths:
        return Deletion(kept=out_kept), {}
    storage, _ = locate(paths[0], options)
    by_name: dict[str, str] = {}
    sizes: dict[str, int] = {}
    for path in paths:
        st, name = locate(path, options)
        if st is not storage:
            out_kept[path] = "on another storage than the table's other files"
            continue
        info = storage.head(name)
        if info is None:
            continue  # gone already: nothing to delete
        if horizon_ms is not None and info.mtime * 1000 >= horizon_ms:
            out_kept[path] = "modified after the plan's horizon (written again since it was planned)"
            continue
        by_name[name], sizes[path] = path, int(info.size)
    done = delete_proved(storage, IcebergReferences(table, options), list(by_name))
    out_kept.update({by_name[n]: why for n, why in done.kept.items()})
    deleted = tuple(by_name[n] for n in done.deleted)
    return Deletion(deleted=deleted, kept=out_kept), {p: sizes[p] for p in deleted}


def _outcome(done: Deletion, sizes: Mapping[str, int], before: int | None, after: int | None, *,
             snapshots: list[int] | None = None) -> ActionOutcome:
    if done.kept:
        log.info("kept %d listed file(s) (e.g. %s: %s)", len(done.kept), *next(iter(sorted(done.kept.items()))))
    return ActionOutcome(
        files_removed=len(done.deleted), bytes_removed=sum(sizes.values()), version_before=before, version_after=after,
        details=ActionDetails(files=sorted(done.deleted)[:SHOWN], file_count=len(done.deleted),
                              kept=dict(sorted(done.kept.items())[:SHOWN]) or None, snapshots=snapshots))
