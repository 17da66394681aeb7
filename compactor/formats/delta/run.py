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
from concurrent.futures import Future
from dataclasses import dataclass
from typing import Any, Mapping, Sequence

import pyarrow as pa

from compactor.engines.base import BinJob, RewriteEngine, WrittenFile
from compactor.errors import (ApplyError, CompactorError, PlanError, StalePlanError, UnsupportedTableError,
                              VerificationError)
from compactor.formats.base import ActionContext, ActionOutcome
from compactor.formats.delta import guard
from compactor.formats.delta.commit import (MARKER, NewFile, RemovedFile, commit_properties, commit_swap, find_commit,
                                            new_file_name)
from compactor.formats.delta.log import Commit, commits_after
from compactor.formats.delta.plan import DELTA_RS_UNWRITABLE, unsupported_reason
from compactor.models.state import TableState
from compactor.planning.actions import (Action, RewriteAction, SetPropertiesAction, SortAction, VacuumAction,
                                        ZOrderAction)
from compactor.planning.retention import DELETED, parse_interval
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
    return _rewrite(action, ctx, engine)


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
    for r in rows.select(["path", "size_bytes", "num_records", *cols]).to_pylist():
        pv = {c: r[f"partition.{c}"] for c in state.partition_columns}
        if pv != dict(action.partition):
            raise PlanError(f"planned file {r['path']} is in partition {pv}, not in the action's partition "
                            f"{dict(action.partition)}: the plan was edited", hint="re-run `compactor plan`")
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
        jobs.append(BinJob(tuple(join(uri, p) for p in b), join(uri, out), join(uri, stage), sort_by))
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
    """One action's bins, rewritten (or being rewritten in the background) and not yet committed."""

    action: RewriteAction
    outputs: list[str]
    staging: list[str]
    journal: ActionJournal
    future: Future[list[WrittenFile]]


def _prepare(action: RewriteAction, ctx: ActionContext, engine: RewriteEngine, schema: pa.Schema, key: str, *,
             background: bool) -> _Prepared:
    """Journal the action's outputs, then rewrite its bins: now, or on a background thread (the next
    action's bins are rewritten while this one commits)."""
    uri = ctx.table.path
    jobs, outputs, staging = _jobs(uri, action)
    journal = ActionJournal(uri, ctx.commit_metadata.get("compactor.run_id", ""), key, ctx.state.version,
                            outputs=outputs, staging=staging, storage_options=ctx.storage_options)
    journal.__enter__()  # on storage before the engine writes a single file

    def run() -> list[WrittenFile]:
        return engine.rewrite(jobs, schema)

    future: Future[list[WrittenFile]] = Future()
    if background:
        threading.Thread(target=_fill_future, args=(future, run), name="prepare-next", daemon=True).start()
    else:
        _fill_future(future, run)
    return _Prepared(action, outputs, staging, journal, future)


def _fill_future(future: Future, fn: Any) -> None:
    try:
        future.set_result(fn())
    except BaseException as e:  # noqa: BLE001 - handed to whoever waits for it
        future.set_exception(e)


def _end(prepared: _Prepared, uri: str, storage_options: Mapping[str, str], read_version: int, marker: str,
         error: BaseException | None) -> None:
    """Close the prepared action's journal; after a failure, first delete what it wrote (unless its
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
    """Discard an action prepared in the background that never ran (stale, or the table stopped)."""
    pending = cache.pop("prepared", None)
    if pending is None:
        return
    prepared, uri, storage_options, read_version = pending
    _end(prepared, uri, storage_options, read_version, "", StalePlanError("prepared action did not run"))


def _take_prepared(ctx: ActionContext, action: RewriteAction) -> _Prepared | None:
    pending = ctx.cache.pop("prepared", None)
    if pending is None:
        return None
    if pending[0].action is action:
        return pending[0]
    discard_prepared({"prepared": pending})
    return None


def _prepare_next(ctx: ActionContext, engine: RewriteEngine, schema: pa.Schema) -> None:
    """Start rewriting the table's next action now, if it is a rewrite this pipeline will run."""
    nxt = ctx.next_action
    if nxt is None or not isinstance(nxt, RewriteAction) or isinstance(nxt, ZOrderAction) or ctx.dry_run:
        return
    if _native(nxt, engine) or unsupported_reason(ctx.state, engine.name):
        return
    try:
        inputs = planned_inputs(ctx.state, nxt, ctx.cache)
        _refuse_unrewritable(ctx, inputs)
    except CompactorError:
        return  # its own run reports it
    key = ctx.commit_metadata[MARKER] + ":next"
    prepared = _prepare(nxt, ctx, engine, schema, key, background=True)
    ctx.cache["prepared"] = (prepared, ctx.table.path, ctx.storage_options, int(ctx.state.version or 0))


def _rewrite(action: RewriteAction, ctx: ActionContext, engine: RewriteEngine) -> ActionOutcome:
    state, uri, so = ctx.state, ctx.table.path, ctx.storage_options
    read_version = int(state.version or 0)
    inputs = planned_inputs(state, action, ctx.cache)
    _refuse_unrewritable(ctx, inputs)
    dt = handle(ctx)
    schema = data_schema(dt, state.partition_columns)
    marker = ctx.commit_metadata[MARKER]
    prepared = _take_prepared(ctx, action) or _prepare(action, ctx, engine, schema, marker, background=False)
    try:
        written = prepared.future.result()
        _prepare_next(ctx, engine, schema)  # the next action's bins are rewritten while this one commits
        verify_footers(action.bins, written)
        added = [NewFile(rel, w.size, dict(action.partition), w.stats, w.rows)
                 for rel, w in zip(prepared.outputs, written)]
        removed = [inputs[p] for p in action.input_paths]
        own = commit_swap(dt, uri, so, read_version=read_version, removed=removed, added=added,
                          commit_metadata=ctx.commit_metadata)
    except BaseException as e:
        _end(prepared, uri, so, read_version, marker, e)
        raise
    _end(prepared, uri, so, read_version, marker, None)
    outcome = ActionOutcome(
        files_removed=len(removed), files_added=len(added), bytes_removed=sum(r.size for r in removed),
        bytes_added=sum(a.size for a in added), rows_removed=sum(w.rows_in for w in written),
        rows_added=sum(w.rows for w in written), version_before=read_version, version_after=own.version,
        removed_paths=tuple(r.path for r in removed), added_paths=tuple(a.path for a in added),
        details={"bins": len(action.bins)})
    return _after_commit(ctx, dt, own, removed, outcome)


def _after_commit(ctx: ActionContext, dt: Any, own: Commit, removed: Sequence[RemovedFile],
                  outcome: ActionOutcome) -> ActionOutcome:
    """The overlap guard, then the log check: the commit holds exactly the planned swap."""
    uri, so = ctx.table.path, ctx.storage_options
    read_version = int(outcome.version_before or 0)
    overlap = guard.overlapping_removes(uri, so, read_version, own.version, [r.path for r in removed])
    if overlap:
        repair = guard.undo_commit(dt, uri, so, own, removed, overlap, ctx.commit_metadata)
        outcome.details["repaired"] = {"overlapping_removes": len(overlap), "repair_version": repair.version,
                                       "conflicting_versions": sorted(set(overlap.values()))}
        outcome.version_after = repair.version
        outcome.files_added = outcome.files_removed = 0
        return outcome
    check_commit(own, outcome)
    return outcome


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
    added_rows = [(_num_records(a) if _num_records(a) is not None else _footer_rows(uri, p, so))
                  for p, a in own.adds.items()]
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
    from compactor.engines.spark import optimize_conf, optimize_sql

    uri = ctx.table.path
    dt = handle(ctx)
    read_version = dt.version()
    records = dict(zip(ctx.state.files.column("path").to_pylist(), ctx.state.files.column("num_records").to_pylist()))
    conf = {**optimize_conf(action.target_file_size, action.min_file_size),
            "spark.databricks.delta.commitInfo.userMetadata": json.dumps(dict(ctx.commit_metadata))}
    z = list(action.z_order_by) if isinstance(action, ZOrderAction) else []
    clustered = "clustering" in ctx.state.protocol.writer_features
    sql = optimize_sql(engine.hadoop_path(uri), {} if clustered else action.partition, z)
    try:
        engine.sql(sql, conf)
    finally:
        engine.spark.conf.unset("spark.databricks.delta.commitInfo.userMetadata")
    own = find_commit(uri, ctx.storage_options, read_version, ctx.commit_metadata[MARKER], timeout_s=1)
    if own is None:
        return ActionOutcome(version_before=read_version, version_after=read_version,
                             details={"note": "delta-spark OPTIMIZE found nothing to rewrite", "sql": sql})
    outcome = _outcome_from_log(ctx, dt, own, read_version, records)
    outcome.details["sql"] = sql
    return outcome


# ----------------------------------------------------------------------------- retention


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
    engine = ctx.engine() if ctx.target.engine == "spark" else None
    if engine is not None and hasattr(engine, "sql") and engine.delta_sql_available() \
            and engine.native_commits_safe(ctx.table.path):
        from compactor.engines.spark import vacuum_sql

        # VACUUM reports the files it would delete only in a dry run
        path = engine.hadoop_path(ctx.table.path)
        candidates = [r[0] for r in engine.sql(vacuum_sql(path, hours, True))]
        if not ctx.dry_run:
            engine.sql(vacuum_sql(path, hours, False))
        return ActionOutcome(files_removed=0 if ctx.dry_run else len(candidates), version_before=ctx.state.version,
                             version_after=handle(ctx).version(),
                             details={"dry_run": ctx.dry_run, "files": sorted(candidates)[:1000],
                                      "file_count": len(candidates), "engine": "delta-spark"})
    _check_writable(ctx)
    # checked above against the (possibly simulated) table property; delta-rs would check the stored one
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
        dt.alter.set_table_properties(props, raise_if_not_exists=False)
    return ActionOutcome(version_before=before, version_after=handle(ctx).version(),
                         details={"properties": props, "dry_run": ctx.dry_run})
