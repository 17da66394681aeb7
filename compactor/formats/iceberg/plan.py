"""Plan one Iceberg table (PURE): bins per partition of each spec with the shared planner
(planning/partitions.py: triggers, where, lookback, budgets, bins of exact files), the snapshot id as every
action's precondition version. A where or lookback on the source columns of the partitioning is projected
through each spec's transforms (where.py) and the shared planner takes its verdict per partition. On the
local engine the files it cannot rewrite exactly are left alone with Iceberg's own skip reasons (actions.py), one skip per partition holding some: files with delete files,
files of an older partition spec, files not in Parquet (support.py says the same at apply, again). A file over
a delete trigger (``max_deleted_rows_ratio``, ``delete_file_threshold``: ``delete_candidates``) is a candidate
whatever its size and is rewritten even alone, as Iceberg's rewrite_data_files does: the rewrite drops its
deletes. Then Iceberg's own maintenance (maintenance_plan.py) and the policy's retention (retention_plan.py),
after the compaction."""

from __future__ import annotations

import datetime as dt
from collections.abc import Callable
from dataclasses import replace

import pyarrow as pa

from compactor.formats.iceberg.actions import (
    LATER,
    NATIVE_NEEDS_SPARK,
    NATIVE_REWRITE,
    NATIVE_SEMANTICS,
    IcebergSkipReason,
)
from compactor.formats.iceberg.maintenance_actions import RewriteManifestsAction
from compactor.formats.iceberg.maintenance_plan import partition_values, plan_maintenance
from compactor.formats.iceberg.read import iceberg_state
from compactor.formats.iceberg.state import IcebergDataFile, IcebergState
from compactor.formats.iceberg.support import table_problem
from compactor.formats.iceberg.where import source_columns, source_filter
from compactor.models.state import TableState
from compactor.planning.bins import BIN_MODELS
from compactor.planning.explain import NEEDS
from compactor.planning.partitions import plan_partitions
from compactor.planning.plan import Skip, SkipReason, TablePlan
from compactor.planning.scope import partition_scope
from compactor.policy.model import TablePolicy, Triggers

#: the bin model of the local rewrite: the shared ascending-size packing
BIN_MODEL = BIN_MODELS[0]
#: the engines whose Iceberg path exists
ENGINES = ("local", "spark")


def unsupported_reason(st: IcebergState, engine: str) -> str | None:
    """Why ``engine`` compacts nothing of this table, or None."""
    if engine not in ENGINES:
        return f"the {engine} engine does not compact Iceberg tables: use a target whose engine is local or spark"
    return table_problem(st) if engine == "local" else None


#: what the local engine leaves alone: (reason, what the files are, the test on one file)
_LEFT_ALONE: tuple[tuple[IcebergSkipReason, str, Callable[[IcebergDataFile, IcebergState], bool]], ...] = (
    (IcebergSkipReason.DELETE_FILES, "with delete files (pyiceberg cannot remove delete files, and compactor "
     "leaves none live that only rewritten files referenced)", lambda f, st: bool(f.deletes)),
    (IcebergSkipReason.OLDER_SPEC, "in an older partition spec (pyiceberg adds files to the current spec only)",
     lambda f, st: f.spec_id != st.default_spec_id),
    (IcebergSkipReason.NOT_PARQUET, "not in Parquet (the local engine reads and verifies Parquet only)",
     lambda f, st: f.file_format != "PARQUET"),
)


def _left_alone(state: TableState, st: IcebergState) -> tuple[pa.Array | None, list[Skip]]:
    """The mask of files the local engine may rewrite, and one skip per (reason, partition) of the others."""
    ok: list[bool] = []
    counts: dict[tuple[IcebergSkipReason, tuple[tuple[str, str | None], ...]], int] = {}
    for f in st.files:
        why = next((r for r, _, test in _LEFT_ALONE if test(f, st)), None)
        ok.append(why is None)
        if why is not None:
            values = partition_values(state.partition_columns, f.spec_id, f.partition)
            key = (why, tuple(values.items()))
            counts[key] = counts.get(key, 0) + 1
    if all(ok):
        return None, []
    words = {r: what for r, what, _ in _LEFT_ALONE}
    skips = [Skip(reason, dict(values) or None, {"files": n}, f"{n} file(s) {words[reason]}: the local engine leaves "
                  f"them alone; {LATER}")
             for (reason, values), n in sorted(counts.items(), key=str)]
    return pa.array(ok, pa.bool_()), skips


#: Iceberg's rewrite_data_files ``delete-ratio-threshold`` default: the share of a file's rows its
#: file-scoped deletes remove that makes it a candidate (BinPackRewriteFilePlanner, Iceberg 1.12)
DELETE_RATIO_DEFAULT = 0.3


def delete_candidates(st: IcebergState, triggers: Triggers) -> pa.Array | None:
    """The files rewrite_data_files rewrites for their deletes whatever their size, even alone: those whose
    file-scoped deletes remove at least ``max_deleted_rows_ratio`` of their rows (default Iceberg's 0.3), or
    with at least ``delete_file_threshold`` delete files; None when no file has deletes."""
    if not any(f.deletes for f in st.files):
        return None
    ratio = DELETE_RATIO_DEFAULT if triggers.max_deleted_rows_ratio is None else triggers.max_deleted_rows_ratio
    most = triggers.delete_file_threshold
    return pa.array([bool(f.deletes) and (
        (f.record_count > 0 and f.deleted_rows_known / f.record_count >= ratio)
        or (most is not None and len(f.deletes) >= most)) for f in st.files], pa.bool_())


def plan_iceberg_table(policy: TablePolicy, state: TableState, *, now: dt.datetime, engine: str) -> TablePlan:
    """The table's compaction, then its own maintenance (maintenance_plan.py: position delete files and
    manifests), then what its policy's retention plans (retention_plan.py)."""
    from compactor.formats.iceberg.retention_plan import plan_retention

    planned = _plan_compaction(policy, state, now=now, engine=engine)
    if not policy.enabled or planned.error is not None:
        return planned
    st = iceberg_state(state)
    own, skips = plan_maintenance(policy.compaction, st, state.partition_columns, version=state.version,
                                  engine=engine)
    # a manifest rewrite first: it leaves every data and delete file live, so the compaction planned at the
    # same snapshot still finds its inputs (after the compaction's commit its manifests would have changed);
    # a position delete rewrite after the compaction, which may remove some of its partition's delete files
    manifests = [a for a in own if isinstance(a, RewriteManifestsAction)]
    after = [a for a in own if not isinstance(a, RewriteManifestsAction)]
    if policy.retention is not None:
        more, also = plan_retention(policy.retention, st.retention, version=state.version, now=now, engine=engine)
        after, skips = [*after, *more], [*skips, *also]
    return replace(planned, actions=(*manifests, *planned.actions, *after), skipped=(*planned.skipped, *skips))


def _plan_compaction(policy: TablePolicy, state: TableState, *, now: dt.datetime, engine: str) -> TablePlan:
    st = iceberg_state(state)
    base = TablePlan(
        name=policy.name, path=state.uri, format=policy.format, engine=engine, version=state.version,
        bin_model=BIN_MODEL, partition_columns=state.partition_columns, files_before=state.file_count,
        bytes_before=state.total_bytes, policy_source=str(policy.source), table_id=state.table_id)
    if not policy.enabled:
        return replace(base, files_after=state.file_count,
                       skipped=(Skip(SkipReason.DISABLED, None, {}, "table policy has enabled: false"),))
    c = policy.compaction
    if not c.enabled:
        return replace(base, files_after=state.file_count,
                       skipped=(Skip(SkipReason.DISABLED, None, {}, "compaction.enabled is false"),))
    reason = unsupported_reason(st, engine)
    if reason:
        return replace(base, files_after=state.file_count, skipped=(Skip(SkipReason.UNSUPPORTED, None, {}, reason),))
    if engine == "local" and c.method == "optimize":
        return replace(base, files_after=state.file_count,
                       skipped=(Skip(SkipReason.UNSUPPORTED, None, {NEEDS: NATIVE_REWRITE}, NATIVE_NEEDS_SPARK),))
    scope = partition_scope(policy, state.partition_columns, column="partition field",
                            columns="the table's partition fields", sources=source_columns(st))
    if scope.problem is not None:
        return _config_error(base, state, scope.problem)
    where = scope.where
    selected = None
    if scope.where_on_sources or scope.lookback_on_source:  # projected through the transforms (where.py)
        found = source_filter(policy, st, state.partition_columns, scope, now)
        if isinstance(found, str):
            return _config_error(base, state, found)
        selected = found
        if scope.where_on_sources:
            where = None
        if scope.lookback_on_source:
            c = replace(c, partitions=replace(c.partitions, lookback=None))
    eligible, skips = _left_alone(state, st) if engine == "local" else (None, [])
    actions, more = plan_partitions(state.files, state.partition_columns, c, now=now, bin_model=BIN_MODEL,
                                    version=state.version, where=where, eligible=eligible, scope=selected,
                                    forced=delete_candidates(st, c.triggers), forced_alone=True)
    if c.method == "optimize":  # the spark engine's rewrite_data_files: what it does beyond the plan, said
        actions = [replace(a, reason=f"{a.reason}; {NATIVE_SEMANTICS}") for a in actions]
    removed = sum(a.input_files - a.expected_output_files for a in actions)
    return replace(base, actions=tuple(actions), skipped=(*skips, *more), files_after=state.file_count - removed)


def _config_error(base: TablePlan, state: TableState, msg: str) -> TablePlan:
    return replace(base, files_after=state.file_count, error=msg,
                   skipped=(Skip(SkipReason.INVALID_POLICY, None, {}, msg),))
