"""Delta's own compactions: delta-spark OPTIMIZE (one statement per commit group) on the spark engine,
delta-rs z-order on the local engine."""


from __future__ import annotations

import json
import logging
from collections.abc import Mapping, Sequence
from typing import Any

from compactor.errors import (
    ApplyError,
    UnsupportedTableError,
    VerificationError,
)
from compactor.formats.base import ActionContext, ActionOutcome
from compactor.formats.delta.apply.commit import (
    MARKER,
    RemovedFile,
    commit_properties,
    find_commit,
)
from compactor.formats.delta.apply.context import check_writable, fence, handle
from compactor.formats.delta.apply.rewrite import after_commit
from compactor.formats.delta.plan.support import unsupported_reason
from compactor.formats.delta.read.facts import delta_facts
from compactor.formats.delta.read.log import Commit, num_records
from compactor.models.results import ActionDetails
from compactor.models.table import TableLocation
from compactor.planning.actions import (
    RewriteAction,
    ZOrderAction,
)
from compactor.runtime.journal import ActionJournal, folders_of
from compactor.runtime.paths import join

log = logging.getLogger(__name__)


def written_by_delta_rs(created_by: str) -> bool:
    """Whether a parquet footer's writer (``created_by``) is delta-rs, which writes a z-order's files under
    names of its own (the journal's folder rule, runtime/journal.py): it stamps ``delta-rs version
    py-1.6.6`` (older builds: ``parquet-rs``); Spark writes ``parquet-mr``."""
    return created_by.startswith(("delta-rs", "parquet-rs"))


def partition_filters(partition: Mapping[str, str | None]) -> list[tuple[str, str, Any]] | None:
    """delta-rs partition filters for one partition. A null partition value must be written as "":
    delta-rs rejects None (measured with deltalake 1.6.6)."""
    if not partition:
        return None
    return [(k, "=", "" if v is None else v) for k, v in partition.items()]


def z_order_delta_rs(action: ZOrderAction, ctx: ActionContext) -> ActionOutcome:
    """delta-rs z-orders the whole partition as it finds it (files appended since planning included);
    rows are verified from its commit."""
    check_writable(ctx)
    # delta-rs itself reads and writes here: none of the local engine's own rewrite's support (column
    # mapping, deletion vectors) applies
    reason = unsupported_reason(ctx.state, "delta-rs")
    if reason:
        raise UnsupportedTableError(f"{ctx.table.name}: {reason}")
    where = ctx.location
    dt = handle(ctx)
    read_version = dt.version()
    records = dict(zip(ctx.state.files.column("path").to_pylist(), ctx.state.files.column("num_records").to_pylist()))
    marker = ctx.commit_metadata[MARKER]
    with ActionJournal(where.uri, ctx.commit_metadata.get("compactor.run_id", ""), marker, read_version,
                       folders=folders_of(action.input_paths), storage_options=where.storage_options):
        metrics = dt.optimize.z_order(list(action.z_order_by), partition_filters=partition_filters(action.partition),
                                      target_size=action.target_file_size,
                                      commit_properties=commit_properties(ctx.commit_metadata))
    if not metrics.get("numFilesAdded") and not metrics.get("numFilesRemoved"):
        return ActionOutcome(version_before=read_version, version_after=read_version,
                             details=ActionDetails(note="delta-rs found nothing to rewrite"))
    own = find_commit(where, read_version, marker)
    if own is None:
        raise ApplyError(f"delta-rs z-order committed but its commit (marker {marker}) is not in the log")
    return outcome_from_log(ctx, dt, own, read_version, records)


def outcome_from_log(ctx: ActionContext, dt: Any, own: Commit, read_version: int,
                      records: Mapping[str, int | None]) -> ActionOutcome:
    """Rows of a commit written by another engine (delta-rs optimize, delta-spark OPTIMIZE): from the log's
    statistics, from the footers where a file has none; deletion vectors subtract their cardinality."""
    where = ctx.location
    removed_rows = []
    for path, rem in own.removes.items():
        n = records.get(path)
        if n is None:
            n = _footer_rows(where, path)
        dv = rem.get("deletionVector") or {}
        removed_rows.append(n - int(dv.get("cardinality") or 0))
    logged = [num_records(a) for a in own.adds.values()]
    added_rows = [n if n is not None else _footer_rows(where, p) for n, p in zip(logged, own.adds)]
    outcome = ActionOutcome(
        files_removed=len(own.removes), files_added=len(own.adds),
        bytes_removed=sum(int(r.get("size") or 0) for r in own.removes.values()),
        bytes_added=sum(int(a.get("size") or 0) for a in own.adds.values()),
        rows_removed=sum(removed_rows), rows_added=sum(added_rows), version_before=read_version,
        version_after=own.version, removed_paths=tuple(own.removes), added_paths=tuple(own.adds))
    removed = [RemovedFile(p, int(r.get("size") or 0), r.get("partitionValues") or {}, records.get(p))
               for p, r in own.removes.items()]
    outcome = after_commit(ctx, dt, own, removed, outcome)
    if outcome.rows_removed != outcome.rows_added and outcome.details.repaired is None:
        raise VerificationError(f"commit {own.version} removed {outcome.rows_removed} live rows and added "
                                f"{outcome.rows_added} (from the log's statistics, footers where it has none)")
    return outcome


def _footer_rows(table: TableLocation, path: str) -> int:
    from compactor.engines.footer_facts import footer_rows

    return footer_rows([join(table.uri, path)], table.storage_options)


def native_optimize(action: RewriteAction, ctx: ActionContext, engine: Any) -> ActionOutcome:
    (outcome,) = native_optimize_group([action], ctx, engine)
    return outcome


def native_optimize_group(actions: Sequence[RewriteAction], ctx: ActionContext, engine: Any) -> list[ActionOutcome]:
    """One delta-spark OPTIMIZE over the actions' partitions (same settings), one commit; rows verified
    over the whole commit, files and rows reported per partition."""
    from compactor.formats.delta.spark_sql import optimize_conf, optimize_sql

    uri = ctx.table.path
    dt = handle(ctx)
    read_version = dt.version()
    records = dict(zip(ctx.state.files.column("path").to_pylist(), ctx.state.files.column("num_records").to_pylist()))
    first = actions[0]
    conf = {**optimize_conf(first.target_file_size, first.min_file_size, first.max_deleted_rows_ratio),
            "spark.databricks.delta.commitInfo.userMetadata": json.dumps(dict(ctx.commit_metadata))}
    z = list(first.z_order_by) if isinstance(first, ZOrderAction) else []
    clustered = "clustering" in delta_facts(ctx.state).protocol.writer_features
    sql = optimize_sql(engine.hadoop_path(uri), {} if clustered else [dict(a.partition) for a in actions], z)
    fence(ctx)
    with engine.session_conf(conf):  # the user's session settings as they were after (an active session is theirs)
        engine.sql(sql)
    own = find_commit(ctx.location, read_version, ctx.commit_metadata[MARKER], timeout_s=1)
    if own is None:
        return [ActionOutcome(version_before=read_version, version_after=read_version,
                              details=ActionDetails(note="delta-spark OPTIMIZE found nothing to rewrite", sql=sql,
                                                    method="native OPTIMIZE"))
                for _ in actions]
    whole = outcome_from_log(ctx, dt, own, read_version, records)
    whole.details.sql, whole.details.method = sql, "native OPTIMIZE"
    if len(actions) == 1:
        return [whole]
    return [_member_outcome(a, own, whole, ctx.state.partition_columns, len(actions)) for a in actions]


def _member_outcome(action: RewriteAction, own: Commit, whole: ActionOutcome,
                    partition_columns: Sequence[str], members: int) -> ActionOutcome:
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
    reverted = whole.details.repaired is not None
    return ActionOutcome(
        files_removed=0 if reverted else len(removes),
        files_added=0 if reverted else len(adds),
        bytes_removed=sum(int(r.get("size") or 0) for r in removes.values()),
        bytes_added=sum(int(a.get("size") or 0) for a in adds.values()),
        rows_removed=action.rows, rows_added=action.rows if adds else 0,
        version_before=whole.version_before, version_after=whole.version_after,
        removed_paths=tuple(removes), added_paths=tuple(adds),
        details=ActionDetails(sql=whole.details.sql, repaired=whole.details.repaired, commit_group=members,
                              method="native OPTIMIZE"))
