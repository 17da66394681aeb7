"""Run one planned action on a Delta table.

Rewrites (compact, sort) go through one pipeline on both engines: a journal names every output before
anything is written, the engine writes exactly one file per planned bin, rows are verified from the
parquet footers (rows removed == rows added, per bin) before anything is committed, one dataChange=false
commit swaps the files (formats/delta/commit.py), and the overlap guard undoes the commit at once if a
concurrent compaction removed the same inputs (formats/delta/guard.py).

Z-order uses delta-rs' optimize on the local engine (compactor has no z-order curve of its own) and
delta-spark OPTIMIZE ZORDER BY on the spark engine. ``method: optimize`` (or ``auto`` when the Delta
jars load) runs delta-spark's native OPTIMIZE instead of the rewrite.
"""

from __future__ import annotations

import json
import logging
import posixpath
import threading
import uuid
from collections.abc import Mapping, Sequence
from concurrent.futures import Future
from dataclasses import dataclass
from typing import Any

import pyarrow as pa

from compactor.engines.base import BinJob, RewriteEngine, WrittenFile
from compactor.errors import (
    ApplyError,
    CompactorError,
    PlanError,
    StalePlanError,
    UnsupportedTableError,
    VerificationError,
)
from compactor.formats.base import ActionContext, ActionOutcome
from compactor.formats.delta import guard
from compactor.formats.delta.commit import (
    MARKER,
    NewFile,
    RemovedFile,
    commit_properties,
    commit_swap,
    find_commit,
    new_file_name,
    refuse_if_table_changed,
    removed_since,
)
from compactor.formats.delta.log import Commit, commits_after
from compactor.formats.delta.plan import DELTA_RS_UNWRITABLE, unsupported_reason
from compactor.models.state import TableState
from compactor.planning.actions import (
    Action,
    RepairAction,
    RewriteAction,
    SetPropertiesAction,
    SortAction,
    VacuumAction,
    ZOrderAction,
)
from compactor.planning.retention import DELETED, parse_interval
from compactor.runtime.faults import crash_point
from compactor.runtime.journal import ActionJournal, folders_of
from compactor.runtime.paths import join
from compactor.runtime.storage import StorageError, storage_for

log = logging.getLogger(__name__)


def open_table(uri: str, storage_options: Mapping[str, str], cache: dict[str, Any]) -> Any:
    """The table's DeltaTable, loaded once per table run (kept in ``cache``), brought up to date."""
    from deltalake import DeltaTable

    from compactor.errors import TableReadError

    dt = cache.get("delta_table")
    try:
        if dt is None:
            dt = cache["delta_table"] = DeltaTable(uri, storage_options=dict(storage_options) or None)
        else:
            dt.update_incremental()
    except Exception as e:  # noqa: BLE001 - delta-rs raises several types
        from compactor.formats.delta.state import _reason

        raise TableReadError(f"{uri}: {_reason(uri, e)}") from None
    return dt


def handle(ctx: ActionContext) -> Any:
    return open_table(ctx.table.path, ctx.storage_options, ctx.cache)


def run_action(action: Action, ctx: ActionContext) -> ActionOutcome:
    if isinstance(action, RepairAction):
        from compactor.formats.delta.repair_action import run_repair

        return run_repair(action, ctx)
    if isinstance(action, VacuumAction):
        return _vacuum(action, ctx)
    if isinstance(action, SetPropertiesAction):
        return _set_properties(action, ctx)
    if not isinstance(action, RewriteAction):
        raise ApplyError(f"{action.type} is not an action for Delta tables")
    engine = ctx.engine()
    if _native(action, engine, ctx.table.path):
        return _native_optimize(action, ctx, engine)
    if isinstance(action, ZOrderAction):
        if hasattr(engine, "sql"):
            raise UnsupportedTableError("z-order on the spark engine needs the Delta jars (compaction.method: "
                                        "optimize) - or use the local engine, which z-orders with delta-rs")
        return _z_order_delta_rs(action, ctx)
    reason = unsupported_reason(ctx.state, engine.name)
    if reason:
        hint = ("load the Delta jars into the Spark session (profile spark.delta_jars) so that delta-spark's "
                "OPTIMIZE compacts it" if hasattr(engine, "sql") else None)
        raise UnsupportedTableError(f"{ctx.table.name}: {reason}", hint=hint)
    (result,) = _rewrite_group([action], ctx, engine)
    if isinstance(result, CompactorError):
        raise result
    return result


def _check_writable(ctx: ActionContext) -> None:
    feats = set(ctx.state.protocol.writer_features) & DELTA_RS_UNWRITABLE
    if feats:
        raise UnsupportedTableError(f"{ctx.table.name}: delta-rs cannot write tables with writer feature(s) "
                                    f"{', '.join(sorted(feats))}")


# ----------------------------------------------------------------------------- the rewrite pipeline


def planned_inputs(state: TableState, action: Action, cache: dict[str, Any] | None = None) -> dict[str, RemovedFile]:
    """The planned input files as they are in ``state``, checked to lie in the action's partition (an
    edited plan could otherwise move files of one partition into another's folder). ``cache``: keeps the
    state's path index for the table's next actions."""
    f = state.files
    index = (cache or {}).get("path_index")
    if index is None or index[0] is not state:
        index = (state, {p: i for i, p in enumerate(f.column("path").to_pylist())})
        if cache is not None:
            cache["path_index"] = index
    rows = f.take(pa.array([index[1][p] for p in action.input_paths if p in index[1]], pa.int64()))
    cols = [f"partition.{c}" for c in state.partition_columns]
    out: dict[str, RemovedFile] = {}
    # a bin-pack compaction rewrites only small files (and files with deleted rows): apply accepts no
    # input the planner would not have chosen from the table as it is now
    small_below = action.min_file_size if isinstance(action, RewriteAction) and \
        type(action).strategy == "bin_pack" else None
    forced = set(state.extra.get("deleted_rows") or ())
    for r in rows.select(["path", "size_bytes", "num_records", *cols]).to_pylist():
        pv = {c: r[f"partition.{c}"] for c in state.partition_columns}
        if pv != dict(action.partition):
            raise PlanError(f"planned file {r['path']} is in partition {pv}, not in the action's partition "
                            f"{dict(action.partition)}: the plan was edited", hint="re-run `compactor plan`")
        if small_below is not None and int(r["size_bytes"]) >= small_below and r["path"] not in forced:
            raise PlanError(f"planned file {r['path']} ({r['size_bytes']} bytes) is not below min_file_size "
                            f"{small_below}: compactor would not compact it; the plan was edited",
                            hint="re-run `compactor plan`")
        out[r["path"]] = RemovedFile(r["path"], int(r["size_bytes"]), pv, r["num_records"])
    return out


def _refuse_unrewritable(ctx: ActionContext, inputs: Mapping[str, RemovedFile]) -> None:
    """Never rewrite a file with a deletion vector (a plain read brings deleted rows back, and a remove
    without the DV's id matches nothing) or one whose log path delta-rs cannot write back."""
    dv = set(ctx.state.extra.get("deleted_rows") or ()) & set(inputs)
    if dv:
        raise UnsupportedTableError(f"{ctx.table.name}: {len(dv)} planned file(s) carry deletion vectors "
                                    f"(deletionVectors), e.g. {sorted(dv)[0]}; compactor's rewrite cannot copy them",
                                    hint="compact them with the spark engine's native OPTIMIZE")
    raw = set(ctx.state.extra.get("unremovable_paths") or ()) & set(inputs)
    if raw:
        raise UnsupportedTableError(f"{ctx.table.name}: {len(raw)} planned file(s) have a log path delta-rs cannot "
                                    f"write back (e.g. {sorted(raw)[0]})",
                                    hint="compact them with the spark engine's native OPTIMIZE")


def data_schema(dt: Any, partition_columns: Sequence[str]) -> pa.Schema:
    """The table's data columns as written in data files: the Delta schema without partition columns."""
    schema = pa.schema(dt.schema().to_arrow())
    return pa.schema([f for f in schema if f.name not in set(partition_columns)])


def _jobs(uri: str, action: RewriteAction) -> tuple[list[BinJob], list[str], list[str]]:
    token = uuid.uuid4().hex[:12]
    sort_by = tuple(action.sort_by) if isinstance(action, SortAction) else ()
    jobs, outputs, staging = [], [], []
    for i, b in enumerate(action.bins):
        folder = posixpath.dirname(b[0])
        out = new_file_name(folder)
        stage = posixpath.join(folder, f"_compactor_staging_{token}_{i}") if folder else f"_compactor_staging_{token}_{i}"
        jobs.append(BinJob(tuple(join(uri, p) for p in b), join(uri, out), join(uri, stage), sort_by,
                           tuple(action.partition)))
        outputs.append(out)
        staging.append(stage)
    return jobs, outputs, staging


def verify_footers(bins: Sequence[Sequence[str]], written: Sequence[WrittenFile]) -> None:
    """Rows read (input footers) == rows written (output footer), bin by bin, before anything commits."""
    for b, w in zip(bins, written):
        if w.rows != w.rows_in:
            raise VerificationError(f"the rewrite of {len(b)} file(s) into {w.location} wrote {w.rows} rows, "
                                    f"the inputs hold {w.rows_in}; nothing was committed")


@dataclass
class _Prepared:
    """A commit group's bins, rewritten (or being rewritten in the background) and not yet committed."""

    actions: tuple[RewriteAction, ...]
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


def _prepare(actions: Sequence[RewriteAction], ctx: ActionContext, engine: RewriteEngine, schema: pa.Schema,
             key: str, *, background: bool) -> _Prepared:
    """Journal the group's outputs, then rewrite all its bins at once (the engine runs up to
    max_concurrent_rewrites of them concurrently): now, or on a background thread (the next group's
    bins are rewritten while this one commits)."""
    uri = ctx.table.path
    jobs: list[BinJob] = []
    outputs: list[str] = []
    staging: list[str] = []
    for a in actions:
        j, o, s = _jobs(uri, a)
        jobs += j
        outputs += o
        staging += s
    journal = ActionJournal(uri, ctx.commit_metadata.get("compactor.run_id", ""), key, ctx.state.version,
                            outputs=outputs, staging=staging, storage_options=ctx.storage_options)
    journal.__enter__()  # on storage before the engine writes a single file
    on_done = None
    if ctx.on_bin_done is not None:
        report = ctx.on_bin_done
        per_bin = []
        for a in actions:
            files = planned_inputs(ctx.state, a, ctx.cache)
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
    return _Prepared(tuple(actions), outputs, staging, journal, future)


def _fill_future(future: Future, fn: Any) -> None:
    try:
        future.set_result(fn())
    except BaseException as e:  # noqa: BLE001 - handed to whoever waits for it
        future.set_exception(e)


def _end(prepared: _Prepared, uri: str, storage_options: Mapping[str, str], read_version: int, marker: str,
         error: BaseException | None) -> None:
    """Close the prepared group's journal; after a failure, first delete what it wrote (unless its
    commit landed after all)."""
    if error is not None:
        try:
            prepared.future.result()  # never delete files a background rewrite is still writing
        except BaseException:  # noqa: BLE001 - its own failure is already the story
            pass
        discard_uncommitted(uri, storage_options, prepared.outputs, prepared.staging, read_version, marker)
        prepared.journal.__exit__(type(error), error, None)
    else:
        prepared.journal.__exit__(None, None, None)


def discard_prepared(cache: dict[str, Any]) -> None:
    """Discard a group prepared in the background that never ran (stale, or the table stopped)."""
    pending = cache.pop("prepared", None)
    if pending is None:
        return
    prepared, uri, storage_options, read_version = pending
    _end(prepared, uri, storage_options, read_version, "", StalePlanError("prepared group did not run"))


def _take_prepared(ctx: ActionContext, actions: Sequence[RewriteAction]) -> _Prepared | None:
    pending = ctx.cache.pop("prepared", None)
    if pending is None:
        return None
    if len(pending[0].actions) == len(actions) and all(a is b for a, b in zip(pending[0].actions, actions)):
        return pending[0]
    discard_prepared({"prepared": pending})
    return None


REWRITE_GROUP = "rewrite"


def group_key(action: Action, state: TableState, engine: RewriteEngine, uri: str) -> Any:
    """Actions with the same key may share one commit (None: the action runs on its own). "rewrite": a
    compaction or sort through compactor's rewrite pipeline, on files it can rewrite; ("optimize", ...):
    delta-spark OPTIMIZE with the same settings, run once over the group's partitions."""
    if not isinstance(action, RewriteAction):
        return None
    if _native(action, engine, uri):
        if "clustering" in state.protocol.writer_features:
            return None  # OPTIMIZE of a clustered table takes no partition predicate
        return ("optimize", action.target_file_size, action.min_file_size,
                tuple(action.z_order_by) if isinstance(action, ZOrderAction) else ())
    if isinstance(action, ZOrderAction) or unsupported_reason(state, engine.name):
        return None
    blocked = set(state.extra.get("deleted_rows") or ()) | set(state.extra.get("unremovable_paths") or ())
    return None if blocked and blocked.intersection(action.input_paths) else REWRITE_GROUP


def _prepare_next(ctx: ActionContext, engine: RewriteEngine, schema: pa.Schema) -> None:
    """Start rewriting the table's next commit group now (it will run: its preconditions hold)."""
    nxt = ctx.next_group
    if not nxt or ctx.dry_run or \
            not all(group_key(a, ctx.state, engine, ctx.table.path) == REWRITE_GROUP for a in nxt):
        return
    try:
        for a in nxt:
            planned_inputs(ctx.state, a, ctx.cache)
    except CompactorError:
        return  # its own run reports it
    key = ctx.commit_metadata[MARKER] + ":next"
    prepared = _prepare(nxt, ctx, engine, schema, key, background=True)  # type: ignore[arg-type]
    ctx.cache["prepared"] = (prepared, ctx.table.path, ctx.storage_options, int(ctx.state.version or 0))


def run_group(actions: Sequence[Action], ctx: ActionContext) -> list[ActionOutcome | CompactorError]:
    """Consecutive actions of one group key, committed together (partial progress per group): their bins
    rewritten at once by compactor's pipeline, or one delta-spark OPTIMIZE over their partitions. Per
    action: its outcome, or the error that kept it out of the commit (stale: an input was removed by a
    concurrent commit). Rows are verified per bin before the commit; a mismatch anywhere commits
    nothing (VerificationError)."""
    engine = ctx.engine()
    keys = {group_key(a, ctx.state, engine, ctx.table.path) for a in actions}
    if len(keys) != 1 or None in keys:
        raise ApplyError(f"actions of partitions {[dict(a.partition) for a in actions]} cannot share a commit")
    rewrites: list[RewriteAction] = list(actions)  # type: ignore[arg-type]
    if keys != {REWRITE_GROUP}:
        return _native_optimize_group(rewrites, ctx, engine)  # type: ignore[return-value]
    return _rewrite_group(rewrites, ctx, engine)


def _rewrite_group(rewrites: Sequence[RewriteAction], ctx: ActionContext,
                   engine: RewriteEngine) -> list[ActionOutcome | CompactorError]:
    """The rewrite pipeline for one commit group (run_group)."""
    state, uri, so = ctx.state, ctx.table.path, ctx.storage_options
    read_version = int(state.version or 0)
    inputs = [planned_inputs(state, a, ctx.cache) for a in rewrites]
    for i in inputs:
        _refuse_unrewritable(ctx, i)
    try:  # nothing is written with an old or a new schema (bins prepared in the background are discarded)
        refuse_if_table_changed(uri, so, read_version)
    except StalePlanError:
        discard_prepared(ctx.cache)
        raise
    dt = handle(ctx)
    schema = data_schema(dt, state.partition_columns)
    marker = ctx.commit_metadata[MARKER]
    prepared = _take_prepared(ctx, rewrites) or _prepare(rewrites, ctx, engine, schema, marker, background=False)
    results: list[ActionOutcome | CompactorError] = []
    try:
        written = prepared.future.result()
        _prepare_next(ctx, engine, schema)  # the next group's bins are rewritten while this one commits
        failures = _verify_members(rewrites, prepared, written)
        if failures:
            raise _GroupNotCommitted(failures)
        crash_point("delta.outputs_written")
        files: list[tuple[list[RemovedFile], list[NewFile], list[WrittenFile]]] = []
        for a, cut, ins in zip(rewrites, prepared.slices(), inputs):
            added = [NewFile(rel, w.size, dict(a.partition), w.stats, w.rows)
                     for rel, w in zip(prepared.outputs[cut], written[cut])]
            files.append(([ins[p] for p in a.input_paths], added, written[cut]))
        stale = _stale_members(uri, so, read_version, files)
        _drop_outputs(uri, so, [f for k, f in enumerate(files) if k in stale])
        keep = [f for k, f in enumerate(files) if k not in stale]
        own = commit_swap(dt, uri, so, read_version=read_version, removed=[r for f in keep for r in f[0]],
                          added=[n for f in keep for n in f[1]], commit_metadata=ctx.commit_metadata,
                          fence=ctx.fence)
    except _GroupNotCommitted as e:
        _end(prepared, uri, so, read_version, marker, e)
        return list(e.members)
    except BaseException as e:
        _end(prepared, uri, so, read_version, marker, e)
        raise
    _end(prepared, uri, so, read_version, marker, None)
    outcomes = []
    for k, (removed, added, w) in enumerate(files):
        if k in stale:
            results.append(stale[k])
            continue
        outcome = ActionOutcome(
            files_removed=len(removed), files_added=len(added), bytes_removed=sum(r.size for r in removed),
            bytes_added=sum(a.size for a in added), rows_removed=sum(x.rows_in for x in w),
            rows_added=sum(x.rows for x in w), version_before=read_version, version_after=own.version,
            removed_paths=tuple(r.path for r in removed), added_paths=tuple(a.path for a in added),
            details={"bins": len(rewrites[k].bins), "commit_group": len(keep), "method": "rewrite"})
        outcomes.append(outcome)
        results.append(outcome)
    _after_group_commit(ctx, dt, own, [r for f in keep for r in f[0]], outcomes)
    return results


class _GroupNotCommitted(Exception):
    """Nothing of a group was committed; per member, why."""

    def __init__(self, members: list[CompactorError]) -> None:
        super().__init__("commit group not committed")
        self.members = members


def _verify_members(actions: Sequence[RewriteAction], prepared: _Prepared,
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


def _stale_members(uri: str, storage_options: Mapping[str, str], read_version: int,
                   files: Sequence[tuple[list[RemovedFile], list[NewFile], list[WrittenFile]]]) -> dict[int, CompactorError]:
    """Members of a group with an input a concurrent commit removed since ``read_version`` (they stay out
    of the commit; the others go ahead). Raises StalePlanError when that is all of them."""
    gone = removed_since(uri, storage_options, read_version, [r.path for f in files for r in f[0]])
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


def _drop_outputs(uri: str, storage_options: Mapping[str, str],
                  files: Sequence[tuple[list[RemovedFile], list[NewFile], list[WrittenFile]]]) -> None:
    """Delete the outputs of group members that stay out of the commit (the journal still names them)."""
    if not files:
        return
    storage = storage_for(uri, storage_options)
    for _, added, _ in files:
        for n in added:
            storage.delete(n.path)


def _after_commit(ctx: ActionContext, dt: Any, own: Commit, removed: Sequence[RemovedFile],
                  outcome: ActionOutcome) -> ActionOutcome:
    """The overlap guard, then the log check: the commit holds exactly the planned swap."""
    uri, so = ctx.table.path, ctx.storage_options
    read_version = int(outcome.version_before or 0)
    overlap = guard.overlapping_removes(uri, so, read_version, own.version, [r.path for r in removed])
    if overlap:
        # no fence: the commit landed, and reverting it must not wait for a lease this run may have lost
        # while paused (the revert is proved on the files like every repair, and re-checks the log)
        repair = guard.undo_commit(uri, so, own, overlap, ctx.commit_metadata)
        outcome.details["repaired"] = {"overlapping_removes": len(overlap), "repair_version": repair.version,
                                       "conflicting_versions": sorted(set(overlap.values()))}
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
    _after_commit(ctx, dt, own, removed, whole)
    if "repaired" in whole.details:  # the whole commit was undone: no member's rewrite stands
        for o in outcomes:
            o.details["repaired"] = whole.details["repaired"]
            o.version_after = whole.version_after
            o.files_added = o.files_removed = 0


def check_commit(own: Commit, outcome: ActionOutcome) -> None:
    """After the commit, from the log: it removes exactly the inputs and adds exactly the outputs, and
    where the log has statistics, rows removed == rows added."""
    if set(own.removes) != set(outcome.removed_paths) or set(own.adds) != set(outcome.added_paths):
        raise VerificationError(f"commit {own.version} does not hold the planned swap "
                                f"({len(own.removes)} removes, {len(own.adds)} adds)")
    added_rows = [_num_records(a) for a in own.adds.values()]
    if None not in added_rows and sum(added_rows) != outcome.rows_added:  # type: ignore[arg-type]
        raise VerificationError(f"commit {own.version}: the log says {sum(added_rows)} rows were added, the "  # type: ignore[arg-type]
                                f"footers {outcome.rows_added}")


def _num_records(action: Mapping[str, Any]) -> int | None:
    stats = action.get("stats")
    if isinstance(stats, str):
        try:
            stats = json.loads(stats)
        except ValueError:
            return None
    return stats.get("numRecords") if isinstance(stats, Mapping) else None


def discard_uncommitted(uri: str, storage_options: Mapping[str, str], outputs: Sequence[str],
                        staging: Sequence[str], read_version: int, marker: str) -> None:
    """Delete what a failed rewrite wrote - unless its commit landed after all (an interrupt inside the
    commit call): files the log references are never deleted. If the log cannot be read, the journal
    stays and the next run's recover decides."""
    try:
        landed = find_commit(uri, storage_options, read_version, marker, timeout_s=0) is not None
    except Exception:  # noqa: BLE001 - any failure to read the log means: decide later
        log.warning("%s: cannot read the log to clean up; the journal is kept for the next run", uri)
        return
    if landed:
        return
    storage = storage_for(uri, storage_options)
    try:
        for rel in outputs:
            storage.delete(rel)
        for rel in staging:
            storage.delete_prefix(rel)
    except StorageError as e:  # the journal stays; the next run's recover deletes what is left
        log.warning("%s: could not delete uncommitted outputs now: %s", uri, e)


def referenced_paths(uri: str, storage_options: Mapping[str, str] | None, since_version: int | None) -> set[str]:
    """Paths live now or named by any add/remove committed after ``since_version`` (crash recovery)."""
    from compactor.formats.delta.state import read_delta_state

    refs = set(read_delta_state(uri, storage_options).paths)
    for c in commits_after(uri, since_version if since_version is not None else -1, storage_options):
        refs.update(c.adds)
        refs.update(c.removes)
    return refs


# ----------------------------------------------------------------------------- delta-rs z-order


def partition_filters(partition: Mapping[str, str | None]) -> list[tuple[str, str, Any]] | None:
    """delta-rs partition filters for one partition. A null partition value must be written as "":
    delta-rs rejects None (measured with deltalake 1.6.6)."""
    if not partition:
        return None
    return [(k, "=", "" if v is None else v) for k, v in partition.items()]


def _z_order_delta_rs(action: ZOrderAction, ctx: ActionContext) -> ActionOutcome:
    """delta-rs z-orders the whole partition as it finds it (files appended since planning included);
    rows are verified from its commit."""
    _check_writable(ctx)
    reason = unsupported_reason(ctx.state, "local")
    if reason:
        raise UnsupportedTableError(f"{ctx.table.name}: {reason}")
    uri, so = ctx.table.path, ctx.storage_options
    dt = handle(ctx)
    read_version = dt.version()
    records = dict(zip(ctx.state.files.column("path").to_pylist(), ctx.state.files.column("num_records").to_pylist()))
    marker = ctx.commit_metadata[MARKER]
    with ActionJournal(uri, ctx.commit_metadata.get("compactor.run_id", ""), marker, read_version,
                       folders=folders_of(action.input_paths), storage_options=so):
        metrics = dt.optimize.z_order(list(action.z_order_by), partition_filters=partition_filters(action.partition),
                                      target_size=action.target_file_size,
                                      commit_properties=commit_properties(ctx.commit_metadata))
    if not metrics.get("numFilesAdded") and not metrics.get("numFilesRemoved"):
        return ActionOutcome(version_before=read_version, version_after=read_version,
                             details={"note": "delta-rs found nothing to rewrite"})
    own = find_commit(uri, so, read_version, marker)
    if own is None:
        raise ApplyError(f"delta-rs z-order committed but its commit (marker {marker}) is not in the log")
    return _outcome_from_log(ctx, dt, own, read_version, records)


def _outcome_from_log(ctx: ActionContext, dt: Any, own: Commit, read_version: int,
                      records: Mapping[str, int | None]) -> ActionOutcome:
    """Rows of a commit written by another engine (delta-rs optimize, delta-spark OPTIMIZE): from the log's
    statistics, from the footers where a file has none; deletion vectors subtract their cardinality."""
    uri, so = ctx.table.path, ctx.storage_options
    removed_rows = []
    for path, rem in own.removes.items():
        n = records.get(path)
        if n is None:
            n = _footer_rows(uri, path, so)
        dv = rem.get("deletionVector") or {}
        removed_rows.append(n - int(dv.get("cardinality") or 0))
    logged = [_num_records(a) for a in own.adds.values()]
    added_rows = [n if n is not None else _footer_rows(uri, p, so) for n, p in zip(logged, own.adds)]
    outcome = ActionOutcome(
        files_removed=len(own.removes), files_added=len(own.adds),
        bytes_removed=sum(int(r.get("size") or 0) for r in own.removes.values()),
        bytes_added=sum(int(a.get("size") or 0) for a in own.adds.values()),
        rows_removed=sum(removed_rows), rows_added=sum(added_rows), version_before=read_version,
        version_after=own.version, removed_paths=tuple(own.removes), added_paths=tuple(own.adds))
    removed = [RemovedFile(p, int(r.get("size") or 0), r.get("partitionValues") or {}, records.get(p))
               for p, r in own.removes.items()]
    outcome = _after_commit(ctx, dt, own, removed, outcome)
    if outcome.rows_removed != outcome.rows_added and "repaired" not in outcome.details:
        raise VerificationError(f"commit {own.version} removed {outcome.rows_removed} live rows and added "
                                f"{outcome.rows_added} (from the log's statistics, footers where it has none)")
    return outcome


def _footer_rows(uri: str, path: str, storage_options: Mapping[str, str]) -> int:
    from compactor.engines.parquet_stats import footer_rows

    return footer_rows([join(uri, path)], storage_options)


# ----------------------------------------------------------------------------- native delta-spark


def _native(action: RewriteAction, engine: RewriteEngine, uri: str = "") -> bool:
    if not hasattr(engine, "sql") or action.method == "rewrite":
        return False
    available = engine.delta_sql_available()  # type: ignore[attr-defined]
    if action.method == "optimize" and not available:
        raise UnsupportedTableError("compaction.method optimize needs the Delta Lake jars in the Spark session",
                                    hint="set spark.delta_jars in the profile, or use method rewrite")
    if available and action.method == "auto" and not engine.native_commits_safe(uri):  # type: ignore[attr-defined]
        log.info("%s: delta-spark's S3 log store is single-driver: rewriting and committing through delta-rs", uri)
        return False
    return available


def _native_optimize(action: RewriteAction, ctx: ActionContext, engine: Any) -> ActionOutcome:
    (outcome,) = _native_optimize_group([action], ctx, engine)
    return outcome


def _native_optimize_group(actions: Sequence[RewriteAction], ctx: ActionContext, engine: Any) -> list[ActionOutcome]:
    """One delta-spark OPTIMIZE over the actions' partitions (same settings), one commit; rows verified
    over the whole commit, files and rows reported per partition."""
    from compactor.engines.spark import optimize_conf, optimize_sql

    uri = ctx.table.path
    dt = handle(ctx)
    read_version = dt.version()
    records = dict(zip(ctx.state.files.column("path").to_pylist(), ctx.state.files.column("num_records").to_pylist()))
    first = actions[0]
    conf = {**optimize_conf(first.target_file_size, first.min_file_size),
            "spark.databricks.delta.commitInfo.userMetadata": json.dumps(dict(ctx.commit_metadata))}
    z = list(first.z_order_by) if isinstance(first, ZOrderAction) else []
    clustered = "clustering" in ctx.state.protocol.writer_features
    sql = optimize_sql(engine.hadoop_path(uri), {} if clustered else [dict(a.partition) for a in actions], z)
    before = {k: engine.spark.conf.get(k, None) for k in conf}
    _fence(ctx)
    try:
        engine.sql(sql, conf)
    finally:  # the user's session settings as they were (an active session is the user's own)
        for k, v in before.items():
            if v is None:
                engine.spark.conf.unset(k)
            else:
                engine.spark.conf.set(k, v)
    own = find_commit(uri, ctx.storage_options, read_version, ctx.commit_metadata[MARKER], timeout_s=1)
    if own is None:
        return [ActionOutcome(version_before=read_version, version_after=read_version,
                              details={"note": "delta-spark OPTIMIZE found nothing to rewrite", "sql": sql})
                for _ in actions]
    whole = _outcome_from_log(ctx, dt, own, read_version, records)
    whole.details["sql"] = sql
    if len(actions) == 1:
        return [whole]
    return [_member_outcome(a, own, whole, ctx.state.partition_columns) for a in actions]


def _member_outcome(action: RewriteAction, own: Commit, whole: ActionOutcome,
                    partition_columns: Sequence[str]) -> ActionOutcome:
    """The part of a grouped OPTIMIZE commit in ``action``'s partition (rows are verified for the whole
    commit; per partition they are the planned rows)."""
    mine = {c: action.partition.get(c) for c in partition_columns}

    def ours(entry: Mapping[str, Any]) -> bool:
        pv = entry.get("partitionValues") or {}
        if pv and len(pv) == len(partition_columns) and not any(c in pv for c in partition_columns):
            # column mapping: the log keys partition values by physical column names
            return sorted(map(str, pv.values())) == sorted(str(v) for v in mine.values())
        return all(pv.get(c) == mine[c] for c in partition_columns)  # a null value may be left out

    removes = {p: r for p, r in own.removes.items() if ours(r)}
    adds = {p: a for p, a in own.adds.items() if ours(a)}
    details = {k: v for k, v in whole.details.items() if k in ("sql", "repaired")}
    return ActionOutcome(
        files_removed=0 if "repaired" in details else len(removes),
        files_added=0 if "repaired" in details else len(adds),
        bytes_removed=sum(int(r.get("size") or 0) for r in removes.values()),
        bytes_added=sum(int(a.get("size") or 0) for a in adds.values()),
        rows_removed=action.rows, rows_added=action.rows if adds else 0,
        version_before=whole.version_before, version_after=whole.version_after,
        removed_paths=tuple(removes), added_paths=tuple(adds),
        details={**details, "commit_group": True, "method": "native OPTIMIZE"})


# ----------------------------------------------------------------------------- retention


def _fence(ctx: ActionContext) -> None:
    """The lease check right before a side effect on the table (runtime/lease.py)."""
    if ctx.fence is not None:
        ctx.fence()


def _vacuum(action: VacuumAction, ctx: ActionContext) -> ActionOutcome:
    dt = handle(ctx)
    hours = int(action.retention_hours)
    # the state, not the handle: in a dry run, a set_properties planned before this action has not run
    declared = parse_interval(ctx.state.properties.get(DELETED))
    table_secs = 7 * 86400 if declared is None else declared  # Delta's default; 0 is a valid value
    if hours * 3600 < table_secs:
        # never below what the table declares (delta-rs would refuse too; say why clearly)
        raise ApplyError(f"vacuum retention {hours}h is below the table's {DELETED} ({table_secs // 3600}h)",
                         hint="apply the set_properties action first or raise the policy's retention")
    engine: Any = ctx.engine() if ctx.target.engine == "spark" else None
    if engine is not None and hasattr(engine, "sql") and engine.delta_sql_available() \
            and engine.native_commits_safe(ctx.table.path):
        from compactor.engines.spark import vacuum_sql

        # VACUUM reports the files it would delete only in a dry run
        path = engine.hadoop_path(ctx.table.path)
        candidates = [r[0] for r in engine.sql(vacuum_sql(path, hours, True))]
        if not ctx.dry_run:
            _fence(ctx)
            engine.sql(vacuum_sql(path, hours, False))
        return ActionOutcome(files_removed=0 if ctx.dry_run else len(candidates), version_before=ctx.state.version,
                             version_after=handle(ctx).version(),
                             details={"dry_run": ctx.dry_run, "files": sorted(candidates)[:1000],
                                      "file_count": len(candidates), "engine": "delta-spark"})
    _check_writable(ctx)
    # checked above against the (possibly simulated) table property; delta-rs would check the stored one
    if not ctx.dry_run:
        _fence(ctx)
    files = dt.vacuum(retention_hours=hours, dry_run=ctx.dry_run, enforce_retention_duration=not ctx.dry_run)
    return ActionOutcome(files_removed=0 if ctx.dry_run else len(files), version_before=ctx.state.version,
                         version_after=dt.version(), details={"dry_run": ctx.dry_run, "files": sorted(files)[:1000],
                                                              "file_count": len(files)})


def _set_properties(action: SetPropertiesAction, ctx: ActionContext) -> ActionOutcome:
    _check_writable(ctx)
    dt = handle(ctx)
    before = dt.version()
    props = {k: str(v) for k, v in action.properties.items()}
    if not ctx.dry_run:
        _fence(ctx)
        dt.alter.set_table_properties(props, raise_if_not_exists=False)
    return ActionOutcome(version_before=before, version_after=handle(ctx).version(),
                         details={"properties": props, "dry_run": ctx.dry_run})
