"""compactor's own rewrite of a commit group (both engines): journal, one output per bin, footer
verification, the pre-commit checks and one dataChange=false commit (formats/delta/apply/commit.py), the overlap
guard after it (formats/delta/apply/guard.py). The next group's bins are rewritten while this one commits.
A purge (plan/purge_action.py) on the local engine is such a group of one: its bins rewritten the same way,
each input's dropped rows checked against its planned cardinality first, the commit recorded as a REORG."""


from __future__ import annotations

import logging
import posixpath
import threading
import uuid
from collections.abc import Callable, Mapping, Sequence
from concurrent.futures import Future
from dataclasses import dataclass, replace
from typing import Any

import pyarrow as pa

from compactor.engines.base import BinInput, BinJob, IgnoredColumn, RewriteEngine, WrittenFile
from compactor.errors import (
    ApplyError,
    CompactorError,
    StalePlanError,
    UnsupportedTableError,
    VerificationError,
)
from compactor.formats.base import ActionContext, ActionOutcome
from compactor.formats.delta.apply import guard
from compactor.formats.delta.apply.commit import (
    MARKER,
    NewFile,
    RemovedFile,
    commit_swap,
    new_file_name,
    refuse_if_table_changed,
    removed_since,
)
from compactor.formats.delta.apply.context import (
    REWRITE_GROUP,
    column_names,
    data_schema,
    group_key,
    handle,
)
from compactor.formats.delta.apply.deletes import group_inputs
from compactor.formats.delta.apply.log_writer import writes_directly
from compactor.formats.delta.apply.session import DeltaSession, session_of
from compactor.formats.delta.apply.settle import check_commit, discard_uncommitted
from compactor.formats.delta.apply.stats import delta_stats
from compactor.formats.delta.plan.purge_action import PurgeAction
from compactor.formats.delta.read.log import Commit
from compactor.formats.delta.read.references import references
from compactor.models.results import ActionDetails, CommitReverted
from compactor.models.table import TableLocation
from compactor.planning.actions import (
    Action,
    SortAction,
)
from compactor.runtime.deletion import delete_proved
from compactor.runtime.faults import crash_point
from compactor.runtime.journal import ActionJournal
from compactor.runtime.paths import join
from compactor.runtime.storage import storage_for

log = logging.getLogger(__name__)

#: Delta's change data bookkeeping: delta-spark's MERGE, UPDATE and DELETE with change data feed on store
#: these columns in the data files they write (``_change_type`` null and ``__is_cdc`` false in every row),
#: and Delta's readers and OPTIMIZE leave them out; so does compactor, once each file's footer proves it
CHANGE_DATA_COLUMNS = (IgnoredColumn("_change_type"), IgnoredColumn("__is_cdc", False))


def _jobs(uri: str, action: Action, drops: Mapping[str, frozenset[int]],
          names: Mapping[str, str]) -> tuple[list[BinJob], list[str], list[str]]:
    """One job per bin; ``drops``: the rows each input's deletion vector deletes (apply/deletes.py);
    ``names``: each column's name in data files (context.column_names)."""
    token = uuid.uuid4().hex[:12]
    sort_by = tuple(names.get(c, c) for c in action.sort_by) if isinstance(action, SortAction) else ()
    jobs, outputs, staging = [], [], []
    for i, b in enumerate(action.bins):
        folder = posixpath.dirname(b[0])
        out = new_file_name(folder)
        stage = posixpath.join(folder, f"_compactor_staging_{token}_{i}") if folder else f"_compactor_staging_{token}_{i}"
        jobs.append(BinJob(tuple(BinInput(join(uri, p), drops.get(p, frozenset())) for p in b), join(uri, out),
                           join(uri, stage), sort_by,
                           tuple(names.get(c, c) for c in action.partition), CHANGE_DATA_COLUMNS))
        outputs.append(out)
        staging.append(stage)
    return jobs, outputs, staging


def verify_footers(bins: Sequence[Sequence[str]], written: Sequence[WrittenFile]) -> None:
    """Rows written (output footer) == rows read (input footers) less the rows the bin dropped, bin by bin,
    before anything commits (column by column the engine checked them: engines/footer_check.py)."""
    for b, w in zip(bins, written):
        if w.rows != w.rows_kept:
            held = f"{w.rows_in}" if not w.rows_dropped else f"{w.rows_kept} ({w.rows_in} less {w.rows_dropped} dropped)"
            raise VerificationError(f"the rewrite of {len(b)} file(s) into {w.location} wrote {w.rows} rows, "
                                    f"the inputs hold {held}; nothing was committed")


@dataclass
class _Prepared:
    """A commit group's bins, rewritten (or being rewritten in the background) and not yet committed."""

    actions: tuple[Action, ...]
    outputs: list[str]
    staging: list[str]
    journal: ActionJournal
    future: Future[list[WrittenFile]]

    def slices(self) -> list[slice]:
        """Each action's bins in the group's job list."""
        out, at = [], 0
        for a in self.actions:
            out.append(slice(at, at + len(a.bins)))
            at += len(a.bins)
        return out


def _prepare(actions: Sequence[Action], inputs: Sequence[Mapping[str, RemovedFile]], ctx: ActionContext,
             engine: RewriteEngine, schema: pa.Schema, key: str, *, background: bool,
             drops: Mapping[str, frozenset[int]], names: Mapping[str, str]) -> _Prepared:
    """Journal the group's outputs, then rewrite all its bins at once (the engine runs up to
    max_concurrent_rewrites of them concurrently): now, or on a background thread (the next group's
    bins are rewritten while this one commits). ``inputs``: each action's planned_inputs; ``drops``: the
    rows each input's deletion vector deletes."""
    uri = ctx.table.path
    jobs: list[BinJob] = []
    outputs: list[str] = []
    staging: list[str] = []
    for a in actions:
        j, o, s = _jobs(uri, a, drops, names)
        jobs += j
        outputs += o
        staging += s
    journal = ActionJournal(uri, ctx.commit_metadata.get("compactor.run_id", ""), key, ctx.state.version,
                            outputs=outputs, staging=staging, storage_options=ctx.storage_options)
    journal.__enter__()  # on storage before the engine writes a single file
    try:
        crash_point("delta.journal_written")
        on_done = None
        if ctx.on_bin_done is not None:
            report = ctx.on_bin_done
            per_bin = []
            for a, files in zip(actions, inputs):
                per_bin += [sum(files[p].size for p in b if p in files) for b in a.bins]
            by_output = {j.output: n for j, n in zip(jobs, per_bin)}

            def on_done(job: BinJob, _: WrittenFile) -> None:
                report(by_output.get(job.output, 0))

        def run() -> list[WrittenFile]:
            return engine.rewrite(jobs, schema, on_done=on_done)

        future: Future[list[WrittenFile]] = Future()
        if background:
            threading.Thread(target=_fill_future, args=(future, run), name="prepare-next", daemon=True).start()
        else:
            _fill_future(future, run)
    except BaseException as e:  # the entry stays for recovery, marked ended, its heartbeat stopped
        journal.__exit__(type(e), e, None)
        raise
    return _Prepared(tuple(actions), outputs, staging, journal, future)


def _fill_future(future: Future[list[WrittenFile]], fn: Callable[[], list[WrittenFile]]) -> None:
    try:
        future.set_result(fn())
    except BaseException as e:  # noqa: BLE001 - handed to whoever waits for it
        future.set_exception(e)


def _end(prepared: _Prepared, table: TableLocation, read_version: int, marker: str,
         error: BaseException | None) -> None:
    """Close the prepared group's journal; after a failure, first delete what it wrote (unless its
    commit landed after all)."""
    if error is not None:
        try:
            prepared.future.result()  # never delete files a background rewrite is still writing
        except BaseException:  # noqa: BLE001 - its own failure is already the story
            pass
        discard_uncommitted(table, prepared.outputs, prepared.staging, read_version, marker)
        prepared.journal.__exit__(type(error), error, None)
    else:
        prepared.journal.__exit__(None, None, None)


@dataclass
class PendingGroup:
    """A commit group prepared in the background for the table's next call (kept in its DeltaSession)."""

    prepared: _Prepared
    location: TableLocation
    read_version: int

    def discard(self) -> None:
        """The group never ran (stale, or the table stopped): delete what it wrote, close its journal."""
        _end(self.prepared, self.location, self.read_version, "",
             StalePlanError("prepared group did not run"))


def _take_prepared(ctx: ActionContext, actions: Sequence[Action]) -> _Prepared | None:
    pending = session_of(ctx).take_pending()
    if pending is None:
        return None
    if isinstance(pending, PendingGroup) and len(pending.prepared.actions) == len(actions) \
            and all(a is b for a, b in zip(pending.prepared.actions, actions)):
        return pending.prepared
    pending.discard()
    return None


def _prepare_next(ctx: ActionContext, engine: RewriteEngine, schema: pa.Schema, names: Mapping[str, str]) -> None:
    """Start rewriting the table's next commit group now (it will run: its preconditions hold)."""
    nxt, session = ctx.next_group, ctx.session
    if not nxt or ctx.dry_run or not isinstance(session, DeltaSession) or \
            not all(group_key(a, ctx.state, engine, ctx.table.path) == REWRITE_GROUP for a in nxt):
        return
    try:
        group = group_inputs(ctx, nxt, engine)
    except CompactorError:
        return  # its own run reports it
    if group.refused:
        return  # its own run reports them
    key = ctx.commit_metadata[MARKER] + ":next"
    prepared = _prepare(nxt, group.files, ctx, engine, schema, key, background=True,
                        drops=group.drops, names=names)
    session.pending = PendingGroup(prepared, ctx.location, int(ctx.state.version or 0))


def rewrite_group(rewrites: Sequence[Action], ctx: ActionContext,
                   engine: RewriteEngine) -> list[ActionOutcome | CompactorError]:
    """The rewrite pipeline for one commit group (run_group)."""
    state, where = ctx.state, ctx.location
    read_version = int(state.version or 0)
    session = session_of(ctx)
    group = group_inputs(ctx, rewrites, engine)
    if group.refused:  # the others go ahead without them
        rest = [a for k, a in enumerate(rewrites) if k not in group.refused]
        done = iter(rewrite_group(rest, ctx, engine) if rest else [])
        return [group.refused[k] if k in group.refused else next(done) for k in range(len(rewrites))]
    inputs, drops = group.files, group.drops
    purges = [a for a in rewrites if isinstance(a, PurgeAction)]
    if purges and len(purges) != len(rewrites):
        raise ApplyError("a purge shares no commit with a compaction")
    for p in purges:  # before anything is written: the rows dropped are those planned
        p.check_dropped({f: len(drops.get(f, ())) for f in p.input_paths})
    try:  # nothing is written with an old or a new schema (bins prepared in the background are discarded)
        refuse_if_table_changed(where, read_version)
    except StalePlanError:
        session.discard_pending()
        raise
    dt = handle(ctx)
    schema = data_schema(dt, state.partition_columns)
    names = column_names(dt)
    if any(k != v for k, v in names.items()) and not writes_directly(dt, where):
        raise UnsupportedTableError(f"{ctx.table.name}: its columns are mapped to physical names, which delta-rs' "
                                    "commit of compactor's files would not write, and compactor cannot write this "
                                    "table's commits itself", hint="use the spark engine's native OPTIMIZE")
    marker = ctx.commit_metadata[MARKER]
    prepared = _take_prepared(ctx, rewrites) or \
        _prepare(rewrites, inputs, ctx, engine, schema, marker, background=False, drops=drops, names=names)
    results: list[ActionOutcome | CompactorError] = []
    try:
        written = prepared.future.result()
        _prepare_next(ctx, engine, schema, names)  # the next group's bins are rewritten while this one commits
        failures = _verify_members(rewrites, prepared, written)
        if failures:
            raise _GroupNotCommitted(failures)
        crash_point("delta.outputs_written")
        files: list[tuple[list[RemovedFile], list[NewFile], list[WrittenFile]]] = []
        for a, cut, ins in zip(rewrites, prepared.slices(), inputs):
            values = {names.get(c, c): v for c, v in a.partition.items()}  # partitionValues: physical names
            added = [NewFile(rel, w.size, values, delta_stats(w.facts), w.rows)
                     for rel, w in zip(prepared.outputs[cut], written[cut])]
            files.append(([replace(ins[p], partition_values=values) for p in a.input_paths], added, written[cut]))
        stale = _stale_members(where, read_version, files)
        _drop_outputs(where, [f for k, f in enumerate(files) if k in stale])
        keep = [f for k, f in enumerate(files) if k not in stale]
        own = commit_swap(dt, where, read_version=read_version, removed=[r for f in keep for r in f[0]],
                          added=[n for f in keep for n in f[1]], commit_metadata=ctx.commit_metadata,
                          fence=ctx.fence,
                          partitions=[dict(a.partition) for k, a in enumerate(rewrites) if k not in stale],
                          purge=bool(purges))
    except _GroupNotCommitted as e:
        _end(prepared, where, read_version, marker, e)
        return list(e.members)
    except BaseException as e:
        _end(prepared, where, read_version, marker, e)
        raise
    _end(prepared, where, read_version, marker, None)
    outcomes = []
    for k, (removed, added, w) in enumerate(files):
        if k in stale:
            results.append(stale[k])
            continue
        outcome = ActionOutcome(
            files_removed=len(removed), files_added=len(added), bytes_removed=sum(r.size for r in removed),
            bytes_added=sum(a.size for a in added), rows_removed=sum(x.rows_kept for x in w),  # live rows, as Iceberg
            rows_added=sum(x.rows for x in w), version_before=read_version, version_after=own.version,
            removed_paths=tuple(r.path for r in removed), added_paths=tuple(a.path for a in added),
            details=ActionDetails(bins=len(rewrites[k].bins), commit_group=len(keep), method="rewrite"))
        outcomes.append(outcome)
        results.append(outcome)
    _after_group_commit(ctx, dt, own, [r for f in keep for r in f[0]], outcomes)
    return results


class _GroupNotCommitted(Exception):
    """Nothing of a group was committed; per member, why."""

    def __init__(self, members: list[CompactorError]) -> None:
        super().__init__("commit group not committed")
        self.members = members


def _verify_members(actions: Sequence[Action], prepared: _Prepared,
                    written: Sequence[WrittenFile]) -> list[CompactorError]:
    """Footer verification of every member. When one fails, nothing of the group may commit: the failing
    members get their VerificationError, the others an error saying why they were not committed."""
    errors: list[CompactorError | None] = []
    for a, cut in zip(actions, prepared.slices()):
        try:
            verify_footers(a.bins, written[cut])
            errors.append(None)
        except VerificationError as e:
            errors.append(e)
    if not any(errors):
        return []
    bad = [dict(a.partition) for a, e in zip(actions, errors) if e is not None]
    return [e if e is not None else ApplyError(f"not committed: partition {bad[0]} of the same commit group "
                                               "failed verification; nothing of the group was committed")
            for e in errors]


def _stale_members(table: TableLocation, read_version: int,
                   files: Sequence[tuple[list[RemovedFile], list[NewFile], list[WrittenFile]]]) -> dict[int, CompactorError]:
    """Members of a group with an input a concurrent commit removed since ``read_version`` (they stay out
    of the commit; the others go ahead). Raises StalePlanError when that is all of them."""
    gone = removed_since(table, read_version, [r.path for f in files for r in f[0]])
    if not gone:
        return {}
    stale: dict[int, CompactorError] = {}
    for k, (removed, _, _) in enumerate(files):
        hit = [r.path for r in removed if r.path in gone]
        if hit:
            stale[k] = StalePlanError(f"{len(hit)} input file(s) were removed by a concurrent commit (e.g. {hit[0]} "
                                      f"in version {gone[hit[0]]}); nothing of this partition was committed",
                                      hint="re-plan")
    if len(stale) == len(files):
        raise next(iter(stale.values()))
    return stale


def _drop_outputs(table: TableLocation,
                  files: Sequence[tuple[list[RemovedFile], list[NewFile], list[WrittenFile]]]) -> None:
    """Delete the outputs of group members that stay out of the commit (the journal still names them),
    through the deletion gate: one the log references (never, unless a commit landed after all) stays."""
    if not files:
        return
    delete_proved(storage_for(table.uri, table.storage_options), references(table),
                  [n.path for _, added, _ in files for n in added])


def after_commit(ctx: ActionContext, dt: Any, own: Commit, removed: Sequence[RemovedFile],
                  outcome: ActionOutcome) -> ActionOutcome:
    """The overlap guard, then the log check: the commit holds exactly the planned swap."""
    where = ctx.location
    read_version = int(outcome.version_before or 0)
    overlap = guard.overlapping_removes(where, read_version, own.version, [r.path for r in removed])
    if overlap:
        # no fence: the commit landed, and reverting it must not wait for a lease this run may have lost
        # while paused (the revert is proved on the files like every repair, and re-checks the log)
        repair = guard.undo_commit(where, own, overlap, ctx.commit_metadata)
        outcome.details.repaired = CommitReverted(len(overlap), repair.version, sorted(set(overlap.values())))
        outcome.version_after = repair.version
        outcome.files_added = outcome.files_removed = 0
        return outcome
    check_commit(own, outcome)
    return outcome


def _after_group_commit(ctx: ActionContext, dt: Any, own: Commit, removed: Sequence[RemovedFile],
                        outcomes: Sequence[ActionOutcome]) -> None:
    """The overlap guard and the log check for a group's one commit (``outcomes``: its members)."""
    whole = ActionOutcome(
        rows_added=sum(o.rows_added or 0 for o in outcomes), version_before=outcomes[0].version_before,
        version_after=own.version, files_removed=sum(o.files_removed for o in outcomes),
        removed_paths=tuple(p for o in outcomes for p in o.removed_paths),
        added_paths=tuple(p for o in outcomes for p in o.added_paths))
    after_commit(ctx, dt, own, removed, whole)
    if whole.details.repaired is not None:  # the whole commit was undone: no member's rewrite stands
        for o in outcomes:
            o.details.repaired = whole.details.repaired
            o.version_after = whole.version_after
            o.files_added = o.files_removed = 0
