"""The one commit path for compactor's Delta rewrites: a dataChange=false swap, written to the log as
delta-spark records an OPTIMIZE (formats/delta/apply/log_writer.py; through delta-rs where compactor cannot write
the commit itself).

Right before committing, the commits since the read version are read (only those, never a log replay):
if any of them removed a file this swap removes, the swap is stale and nothing is committed. The commit
carries compactor's metadata (run id, action marker), by which it is found again afterwards.

Paths given here are logical (decoded): the log writer encodes new files' paths as delta-rs'
create_write_transaction does (log_writer.log_path), and spells each remove as the log spelled its add (the
input's ``spelled``, where that differs: a remove names its add exactly). Every comparison of paths (the
re-checks, the overlap guard, the journal) is of logical paths.
Partition values are strings in the Delta protocol's serialisation (formats/delta/read/state.py).
"""

from __future__ import annotations

import logging
import time
import uuid
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from compactor.errors import ApplyError, StalePlanError, UnsupportedTableError
from compactor.formats.delta.read.deletion_vectors import DescriptorJson
from compactor.formats.delta.read.log import Commit, commits_after
from compactor.models.table import TableLocation
from compactor.runtime.faults import crash_point

log = logging.getLogger(__name__)

MARKER = "compactor.action"


@dataclass(frozen=True)
class NewFile:
    """A file the swap adds: its logical path, size, partition values and Delta statistics."""

    path: str  # relative to the table root, logical
    size: int
    partition_values: Mapping[str, str | None]
    stats: str
    num_records: int


@dataclass(frozen=True)
class RemovedFile:
    """A file the swap removes (``num_records``: its rows as the log states them, None when unknown;
    ``deletion_vector``: its deletion vector descriptor exactly as its add carries it, which its remove
    must carry too, or the remove matches nothing; ``tags`` and ``stats``: its add's, which delta-spark copies
    into a remove, where the log's replay read them; ``spelled``: its path exactly as its add spells it, where
    delta-rs' encoding of ``path`` would spell it otherwise, read from the log's replay)."""

    path: str
    size: int
    partition_values: Mapping[str, str | None]
    num_records: int | None = None
    deletion_vector: DescriptorJson | None = None
    tags: Mapping[str, str] | None = None
    stats: str | None = None
    spelled: str | None = None


def commit_properties(commit_metadata: Mapping[str, str]) -> Any:
    """delta-rs CommitProperties carrying compactor's metadata twice: as top-level commitInfo keys (what
    delta-rs and compactor's own log reader see) and as ``userMetadata``, a JSON string, which is the
    one field of commitInfo that delta-spark's ``DESCRIBE HISTORY`` shows besides its own (measured:
    custom top-level keys are dropped by delta-spark's CommitInfo). Only for commits delta-rs writes
    (formats/delta/apply/log_writer.py's fallback), which `DESCRIBE HISTORY` shows as WRITE/Append."""
    import json

    from deltalake.transaction import CommitProperties

    meta = dict(commit_metadata)
    return CommitProperties(custom_metadata={**meta, "userMetadata": json.dumps(meta, sort_keys=True)})


def new_file_name(partition_dir: str) -> str:
    name = f"part-{uuid.uuid4()}-compactor.c000.snappy.parquet"
    return f"{partition_dir}/{name}" if partition_dir else name


def removed_since(table: TableLocation, version: int, paths: Sequence[str]) -> dict[str, int]:
    """Which of ``paths`` a commit after ``version`` removed -> that commit's version."""
    wanted = set(paths)
    found: dict[str, int] = {}
    for c in commits_after(table, version):
        for p in wanted.intersection(c.removes):
            found.setdefault(p, c.version)
    return found


def table_changed_since(table: TableLocation, version: int) -> int | None:
    """The first commit after ``version`` with a metaData or protocol action (schema, properties, column
    mapping, features), or None. Files planned and rewritten against the table as it was at ``version``
    must not be committed into another schema (finding 2 of issue 18: a rename under column mapping
    between two commit groups had the next group's rewrite fill the renamed column with nulls)."""
    for c in commits_after(table, version):
        if c.changes_table:
            return c.version
    return None


def refuse_if_table_changed(table: TableLocation, version: int) -> None:
    changed = table_changed_since(table, version)
    if changed is not None:
        raise StalePlanError(f"version {changed} changed the table's schema, properties or protocol since version "
                             f"{version}, which the plan was made for; nothing of this group was written or "
                             "committed", hint="re-plan")


def missing_outputs(table: TableLocation, paths: Sequence[str]) -> list[str]:
    """The files among ``paths`` that are not on storage (a commit must never reference a missing file)."""
    import pyarrow.fs as pafs

    from compactor.runtime.paths import filesystem, join

    out = []
    for p in paths:
        fs, fp = filesystem(join(table.uri, p), table.storage_options)
        if fs.get_file_info(fp).type != pafs.FileType.File:
            out.append(p)
    return out


def find_commit(table: TableLocation, after_version: int, marker: str, timeout_s: float = 5.0) -> Commit | None:
    """The commit after ``after_version`` whose metadata carries ``marker`` (None if none within timeout)."""
    deadline = time.monotonic() + timeout_s
    start = after_version
    while True:
        for c in commits_after(table, start):
            if c.metadata(MARKER) == marker:
                return c
            start = c.version
        if time.monotonic() > deadline:
            return None
        time.sleep(0.05)


def refuse_delta_rs_unwritable(table: Any) -> None:
    """Where delta-rs commits (log_writer's fallback), a table with a writer feature it cannot write (in-commit
    timestamps, domains, ...) is refused before anything is committed: its commit would leave them out."""
    from compactor.formats.delta.plan.support import DELTA_RS_UNWRITABLE

    bad = sorted(set(table.protocol().writer_features or ()) & DELTA_RS_UNWRITABLE)
    if bad:
        raise UnsupportedTableError(f"writer feature(s) {', '.join(bad)} cannot be written by delta-rs, which commits "
                                    "to this store (a locking provider guards it); nothing was committed",
                                    hint="compact it with the spark engine's native OPTIMIZE")


def commit_swap(table: Any, where: TableLocation, *, read_version: int,
                removed: Sequence[RemovedFile], added: Sequence[NewFile], commit_metadata: Mapping[str, str],
                fence: Callable[[], None] | None = None, partitions: Sequence[Mapping[str, str | None]] = (),
                z_order_by: Sequence[str] = (), purge: bool = False) -> Commit:
    """One dataChange=false commit: add ``added``, remove ``removed``, recorded as an OPTIMIZE of
    ``partitions`` (``purge``: a REORG ... APPLY (PURGE) of them) (formats/delta/apply/log_writer.py). ``table`` is a DeltaTable handle of the table (at
    ``read_version`` or later), ``where`` its location. Right before it, in this order (docs/safety.md): no
    input removed since ``read_version``, no metaData or protocol change since, every added file on storage,
    the lease still held (``fence``). Returns the commit as written."""
    from deltalake.transaction import AddAction, RemoveAction

    from compactor.formats.delta.apply.log_writer import add_action, optimize, remove_action, reorg_purge, write_commit

    gone = removed_since(where, read_version, [r.path for r in removed])
    if gone:
        p, v = next(iter(gone.items()))
        raise StalePlanError(f"{len(gone)} input file(s) were removed by a concurrent commit (e.g. {p} in "
                             f"version {v}); nothing was committed", hint="re-plan")
    refuse_if_table_changed(where, read_version)
    missing = missing_outputs(where, [f.path for f in added])
    if missing:
        raise ApplyError(f"{len(missing)} file(s) this commit would add are not on storage (e.g. {missing[0]}); "
                         "nothing was committed")
    if fence is not None:
        fence()
    crash_point("delta.before_commit")
    now = int(time.time() * 1000)

    def through_delta_rs() -> None:
        refuse_delta_rs_unwritable(table)
        carried = [r.path for r in removed if r.deletion_vector]
        if carried:  # delta-rs' RemoveAction has no deletionVector: its remove would match nothing
            raise UnsupportedTableError(f"{len(carried)} input file(s) carry deletion vectors (e.g. {carried[0]}), "
                                        "which only compactor's own commit writer can remove, and it cannot write "
                                        "this table's commits; nothing was committed")
        raw = [r.path for r in removed if r.spelled]
        if raw:  # delta-rs encodes the path it is given: its remove would not match the add's spelling
            raise UnsupportedTableError(f"{len(raw)} input file(s) have a log path delta-rs cannot write back (e.g. "
                                        f"{raw[0]}, written raw), and compactor cannot write this table's commits "
                                        "itself (a locking store); nothing was committed",
                                        hint="compact them with the spark engine's native OPTIMIZE")
        actions: list[Any] = [AddAction(f.path, f.size, dict(f.partition_values), now, False, f.stats) for f in added]
        actions += [RemoveAction(r.path, False, now, r.size, dict(r.partition_values)) for r in removed]
        table.create_write_transaction(actions, mode="append", schema=table.schema(),
                                       partition_by=list(table.metadata().partition_columns),
                                       commit_properties=commit_properties(commit_metadata))

    write_commit(table, where, read_version,
                 [*(remove_action(r.path, r.size, r.partition_values, now, r.deletion_vector, tags=r.tags,
                                  stats=r.stats, spelled=r.spelled) for r in removed),
                  *(add_action(f.path, f.size, f.partition_values, f.stats, now) for f in added)],
                 reorg_purge(partitions, [r.size for r in removed], [f.size for f in added],
                             deletion_vectors=sum(1 for r in removed if r.deletion_vector)) if purge else
                 optimize(partitions, [r.size for r in removed], [f.size for f in added], z_order_by=z_order_by,
                          deletion_vectors=sum(1 for r in removed if r.deletion_vector)),
                 commit_metadata, fallback=through_delta_rs)
    own = find_commit(where, read_version, commit_metadata[MARKER])
    if own is None:
        raise ApplyError(f"committed, but could not find compactor's commit (marker {commit_metadata[MARKER]}) "
                         f"after version {read_version}")
    crash_point("delta.after_commit")
    deleted = missing_outputs(where, [f.path for f in added])
    if deleted:  # deleted between the fence and the commit (a paused run whose lease was taken over)
        revert_swap(table, where, own, read_version, removed, added, commit_metadata)
        raise ApplyError(f"{len(deleted)} file(s) compactor committed were deleted by another process right before "
                         f"its commit (e.g. {deleted[0]}; the lease was lost while this run was paused?): the commit "
                         f"(version {own.version}) was reverted, every row is as before")
    return own


def revert_swap(table: Any, where: TableLocation, own: Commit, read_version: int,
                removed: Sequence[RemovedFile], added: Sequence[NewFile], commit_metadata: Mapping[str, str]) -> None:
    """Undo compactor's own swap ``own``: remove the files it added, re-add the files it removed (still
    on storage: their tombstones are seconds old) except those another commit removed first (that
    commit holds their rows). Marked as a repair of ``own`` so that the duplicate replay
    (formats/delta/duplicates/lineage.py) reads it as what it is, not as a re-add."""
    others = removed_since(where, read_version, [r.path for r in removed])
    removed = [r for r in removed if others.get(r.path, own.version) >= own.version]
    from deltalake.transaction import AddAction, RemoveAction

    from compactor.formats.delta.apply.stats import footer_stats
    from compactor.runtime.paths import filesystem, join

    lost = missing_outputs(where, [r.path for r in removed])
    if lost:
        raise ApplyError(f"compactor's commit {own.version} references deleted files and cannot be reverted: "
                         f"{len(lost)} of its inputs are gone too (e.g. {lost[0]})",
                         hint="restore the table to the version before it (RESTORE)")
    now = int(time.time() * 1000)
    actions: list[Any] = []
    for r in removed:
        fs, fp = filesystem(join(where.uri, r.path), where.storage_options)
        _, stats = footer_stats(fp, fs)
        actions.append(AddAction(r.path, r.size, dict(r.partition_values), now, False, stats))
    actions += [RemoveAction(f.path, False, now, f.size, dict(f.partition_values)) for f in added]
    marker = f"{commit_metadata.get(MARKER, 'compactor')}:revert"
    meta = {**commit_metadata, MARKER: marker, "compactor.repair_of": str(own.version),
            "compactor.revert_of": str(own.version)}
    table.update_incremental()

    def through_delta_rs() -> None:
        refuse_delta_rs_unwritable(table)
        if any(r.deletion_vector or r.spelled for r in removed):  # delta-rs' AddAction cannot carry them
            raise ApplyError(f"compactor's commit {own.version} cannot be reverted: its inputs carry deletion vectors "
                             "and delta-rs writes this table's commits", hint="restore the table to the version "
                             "before it (RESTORE)")
        table.create_write_transaction(actions, mode="append", schema=table.schema(),
                                       partition_by=list(table.metadata().partition_columns),
                                       commit_properties=commit_properties(meta))

    from compactor.formats.delta.apply.log_writer import add_action, remove_action, repair, write_commit

    vectors = {r.path: r.deletion_vector for r in removed}
    spellings = {r.path: r.spelled for r in removed}
    restore = [add_action(a.path, a.size, a.partition_values, a.stats, now, vectors.get(a.path),
                          spelled=spellings.get(a.path)) for a in actions if isinstance(a, AddAction)]
    write_commit(table, where, table.version(),
                 [*(remove_action(f.path, f.size, f.partition_values, now) for f in added), *restore],
                 repair([f.size for f in added], [r.size for r in removed], versions=[own.version], reverts=True),
                 meta, fallback=through_delta_rs)
