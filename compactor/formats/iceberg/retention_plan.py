"""Plan a policy's Iceberg retention (PURE): from the facts retention_read.py read and the plan's ``now``,
one ``expire_snapshots`` action naming the exact snapshots to expire and the files that leaves unreferenced,
and one ``remove_orphan_files`` action naming the exact unreferenced files old enough to delete (or a skip
saying why there is nothing to do). Deterministic: snapshot ids and paths sorted.

Which snapshots expire (``expirable``, which apply runs again on the table as it is then): those older than
the horizon (``now - older_than``), except the current snapshot, every snapshot a branch or tag points to,
and the newest ``retain_last`` of the current snapshot's history (it and its ancestors, as Iceberg's
``retain_last`` counts). Which files that frees (``freed_files``): those a manifest of an expired snapshot
names, by an entry of any status, and no manifest of a kept snapshot names, by any entry: the deletion
gate's own rule (references.py), so the plan lists what apply can delete."""

from __future__ import annotations

import datetime as dt
from collections.abc import Collection, Iterable, Mapping, Sequence

from compactor.formats.iceberg.retention_actions import (
    ExpireSnapshotsAction,
    IcebergRetentionSkip,
    RemoveOrphanFilesAction,
)
from compactor.formats.iceberg.retention_facts import RefFact, RetentionFacts, SnapshotFact
from compactor.formats.iceberg.support import MAX_FORMAT_VERSION
from compactor.planning.actions import Action, Precondition
from compactor.planning.plan import Skip, SkipReason
from compactor.policy.model import ExpireSnapshots, RemoveOrphanFiles, Retention
from compactor.units import format_duration


def history(current_id: int | None, snapshots: Iterable[SnapshotFact]) -> list[int]:
    """The current snapshot and its ancestors, newest first (as far as the metadata still holds them)."""
    parents = {s.snapshot_id: s.parent_id for s in snapshots}
    out: list[int] = []
    at = current_id
    while at is not None and at in parents and at not in out:
        out.append(at)
        at = parents[at]
    return out


def expirable(current_id: int | None, snapshots: Sequence[SnapshotFact], refs: Iterable[RefFact], *,
              horizon_ms: int, retain_last: int) -> list[int]:
    """The snapshots that may expire (module docstring), sorted."""
    kept = {r.snapshot_id for r in refs} | set(history(current_id, snapshots)[:max(1, retain_last)])
    if current_id is not None:
        kept.add(current_id)
    return sorted(s.snapshot_id for s in snapshots if s.timestamp_ms < horizon_ms and s.snapshot_id not in kept)


def freed_files(snapshots: Sequence[SnapshotFact], manifests: Mapping[str, tuple[tuple[str, int], ...]],
                expired: Collection[int]) -> dict[str, int]:
    """The files (path -> size) only the manifests of ``expired`` snapshots name (module docstring)."""
    gone = set(expired)
    kept_manifests = {m for s in snapshots if s.snapshot_id not in gone for m in s.manifests}
    kept = {path for m in kept_manifests for path, _ in manifests.get(m, ())}
    out: dict[str, int] = {}
    for s in snapshots:
        if s.snapshot_id in gone:
            for m in s.manifests:
                if m not in kept_manifests:
                    out.update((path, size) for path, size in manifests.get(m, ()) if path not in kept)
    return out


def horizon_ms(now: dt.datetime, older_than: int) -> int:
    return int(now.timestamp() * 1000) - older_than * 1000


def plan_retention(retention: Retention, facts: RetentionFacts | None, *, version: int | None,
                   now: dt.datetime, engine: str = "local") -> tuple[list[Action], list[Skip]]:
    """The retention actions of one table, or skips saying why not (either engine runs them through
    pyiceberg, no JVM; the spark engine expires a v3 table's snapshots with Iceberg's Java library:
    spark_expire.py)."""
    e, o = retention.expire_snapshots, retention.remove_orphan_files
    if not (e.enabled or o.enabled):
        return [], []
    if facts is None or facts.problem is not None:
        why = facts.problem if facts is not None else "its facts were not read"
        return [], [Skip(SkipReason.UNREADABLE, None, {}, f"retention: {why}")]
    actions: list[Action] = []
    skips: list[Skip] = []
    for act, skip in (_expire(e, facts, version, now, engine) if e.enabled else (None, None),
                      _orphans(o, facts, version, now) if o.enabled else (None, None)):
        if act is not None:
            actions.append(act)
        if skip is not None:
            skips.append(skip)
    return actions, skips


def expiry_refusal(format_version: int) -> str | None:
    """Why pyiceberg cannot commit an expiry to a table of ``format_version``, or None."""
    if format_version > MAX_FORMAT_VERSION:
        return (f"the table is an Iceberg format-version {format_version} table: pyiceberg 0.12 cannot write its "
                "metadata, so the local engine does not expire its snapshots (the spark engine does, with Iceberg's own library)")
    return None


def _expire(e: ExpireSnapshots, facts: RetentionFacts, version: int | None, now: dt.datetime,
            engine: str) -> tuple[Action | None, Skip | None]:
    refusal = expiry_refusal(facts.format_version)
    if refusal is not None and engine != "spark":
        return None, Skip(SkipReason.UNSUPPORTED, None, {}, f"expire_snapshots: {refusal}")
    horizon = horizon_ms(now, e.older_than)
    expired = expirable(facts.current_id, facts.snapshots, facts.refs, horizon_ms=horizon, retain_last=e.retain_last)
    age = format_duration(e.older_than)
    if not expired:
        return None, Skip(IcebergRetentionSkip.NOTHING_TO_EXPIRE, None,
                          {"snapshots": len(facts.snapshots), "refs": len(facts.refs), "retain_last": e.retain_last},
                          f"no snapshot older than {age} may expire: {len(facts.snapshots)} snapshot(s), the current "
                          f"one, {len(facts.refs)} branch(es) and tag(s) and the newest {e.retain_last} kept")
    freed = freed_files(facts.snapshots, facts.manifests, expired)
    files = tuple(sorted(freed))
    return ExpireSnapshotsAction(
        older_than=e.older_than, retain_last=e.retain_last, horizon_ms=horizon, snapshots=tuple(expired), files=files,
        input_files=len(files), input_bytes=sum(freed.values()), precondition=Precondition.of(version, files),
        reason=f"expire {len(expired)} snapshot(s) older than {age} and delete the {len(files)} file(s) only they "
               "reference"), None


def _orphans(o: RemoveOrphanFiles, facts: RetentionFacts, version: int | None,
             now: dt.datetime) -> tuple[Action | None, Skip | None]:
    if facts.unreferenced is None:
        return None, Skip(SkipReason.UNSUPPORTED, None, {},
                          f"remove_orphan_files: {facts.listing_problem or 'the location was not listed'}")
    horizon = horizon_ms(now, o.older_than)
    old = [f for f in facts.unreferenced if f.mtime_ms < horizon]
    age = format_duration(o.older_than)
    if not old:
        return None, Skip(IcebergRetentionSkip.NO_ORPHAN_FILES, None, {"younger": len(facts.unreferenced)},
                          f"no file under the table's location is unreferenced and older than {age} "
                          f"({len(facts.unreferenced)} younger)")
    files = tuple(f.path for f in old)
    return RemoveOrphanFilesAction(
        older_than=o.older_than, horizon_ms=horizon, files=files, input_files=len(files),
        input_bytes=sum(f.size for f in old), precondition=Precondition.of(version, files),
        reason=f"delete {len(files)} file(s) under the table's location no snapshot references, older than {age}"), None
