"""Plan one Delta table (PURE): which engines can rewrite it, scoping, partitions, retention, and the
repair of rows live twice (its blockers)."""

from __future__ import annotations

import datetime as dt
from dataclasses import replace
from typing import Any

import pyarrow as pa
import pyarrow.compute as pc

from compactor.formats.delta.plan.actions import (
    NATIVE_OPTIMIZE,
    DeltaSkipReason,
    RepairAction,
    SetPropertiesAction,
    VacuumAction,
    duplicate_blocker,
)
from compactor.formats.delta.plan.purge import plan_purge
from compactor.formats.delta.plan.retention import (
    DEFAULTS,
    DELETED,
    LOG,
    format_interval,
    parse_interval,
    vacuum_retention_hours,
)
from compactor.formats.delta.plan.support import (
    REWRITES_DELETION_VECTORS,
    native_possible,
    purge_droppable,
    purge_possible,
    unsupported_reason,
)
from compactor.formats.delta.read.facts import delta_facts
from compactor.models.state import TableState
from compactor.planning.actions import Action, Precondition
from compactor.planning.explain import NEEDS
from compactor.planning.partitions import plan_partitions
from compactor.planning.plan import Skip, SkipReason, TablePlan
from compactor.planning.scope import partition_scope
from compactor.policy.model import Retention, TablePolicy

#: delta-spark OPTIMIZE rewrites a file whose deletion vector deletes more than this share of its rows
#: (spark.databricks.delta.optimize.maxDeletedRowsRatio), whatever its size: the default of a policy's
#: ``compaction.triggers.max_deleted_rows_ratio`` on a Delta table
MAX_DELETED_ROWS_RATIO = 0.05
#: the bin model of compactor's own rewrite (both engines): the same greedy, ascending-size packing as
#: delta-spark OPTIMIZE, so native OPTIMIZE and the rewrite produce the same files
BIN_MODEL = "delta-spark"


def plan_delta_table(policy: TablePolicy, state: TableState, *, now: dt.datetime, engine: str) -> TablePlan:
    base = TablePlan(
        name=policy.name, path=state.uri, format=policy.format, engine=engine, version=state.version,
        bin_model=BIN_MODEL, partition_columns=state.partition_columns, files_before=state.file_count,
        bytes_before=state.total_bytes, policy_source=str(policy.source), table_id=state.table_id,
        blockers=tuple(duplicate_blocker(d, ()) for d in delta_facts(state).duplicates.reports))
    if not policy.enabled:
        return replace(base, files_after=state.file_count,
                         skipped=(Skip(SkipReason.DISABLED, None, {}, "table policy has enabled: false"),))
    c = policy.compaction
    reason = unsupported_reason(state, engine, c.method)
    unsupported = Skip(SkipReason.UNSUPPORTED, None, {NEEDS: NATIVE_OPTIMIZE}, reason or "")
    can_purge = purge_possible(engine, state)
    if reason and not (c.purge.enabled and can_purge):
        # delta-spark's OPTIMIZE writes what delta-rs cannot (support.native_possible)
        return replace(base, files_after=state.file_count, skipped=(unsupported,))
    scope = partition_scope(policy, state.partition_columns)
    if scope.problem is not None:
        return _config_error(base, state, scope.problem)
    where = scope.where
    actions: list[Any] = []
    skips: list[Skip] = []
    files = state.files
    eligible = forced = None
    if native_possible(engine, c.method):
        forced = _deletion_candidates(state, deleted_rows_ratio(policy))
    else:
        eligible, sk = _rewrite_eligibility(state, engine)
        skips += sk
        if engine in REWRITES_DELETION_VECTORS:  # its rewrite drops the deleted rows: candidates as in OPTIMIZE
            forced = _deletion_candidates(state, deleted_rows_ratio(policy))  # (a bin of one file is dropped, as OPTIMIZE drops it)
    carriers = delta_facts(state).duplicates.carriers
    if carriers:  # the repair removes these: never plan them as inputs
        keep = pc.invert(pc.is_in(files.column("path"), value_set=pa.array(list(carriers), pa.string())))
        files = files.filter(keep)
        eligible = eligible.filter(keep) if eligible is not None else None
        forced = forced.filter(keep) if forced is not None else None
    facts = delta_facts(state)
    purges, sk = plan_purge(policy, files, state.partition_columns, state.version, deleted=facts.deleted_rows,
                            vectors=facts.deletion_vectors, where=where, engine_can_purge=can_purge,
                            today=now.date(), extra_columns=facts.extra_columns, droppable=purge_droppable(engine))
    actions += purges
    skips += sk
    purged = [p for a in purges for p in a.input_paths]
    if reason:  # delta-spark's REORG purges whatever the table's features: only the compaction is unsupported
        return replace(base, actions=tuple(purges), skipped=(unsupported, *sk),
                       files_after=state.file_count - sum(a.input_files - a.expected_output_files for a in purges))
    if purged:  # the purge rewrites these (first): never also a compaction's inputs
        keep = pc.invert(pc.is_in(files.column("path"), value_set=pa.array(purged, pa.string())))
        files = files.filter(keep)
        eligible = eligible.filter(keep) if eligible is not None else None
        forced = forced.filter(keep) if forced is not None else None
    if c.enabled:
        acts, sk = plan_partitions(files, state.partition_columns, c, now=now, bin_model=BIN_MODEL,
                                   version=state.version, where=where, eligible=eligible, forced=forced)
        actions += acts
        skips += sk
    else:
        skips.append(Skip(SkipReason.DISABLED, None, {}, "compaction.enabled is false"))
    if policy.retention is not None:
        kept, sk = plan_retention(policy.retention, state)
        actions += kept
        skips += sk
    repair = _repair_action(state)
    if repair is not None:
        actions.insert(0, repair)
    removed = sum(a.input_files - a.expected_output_files for a in actions if a.rewrites)
    blockers = tuple(duplicate_blocker(d, actions) for d in delta_facts(state).duplicates.reports)
    return replace(base, actions=tuple(actions), skipped=tuple(skips), files_after=state.file_count - removed,
                   blockers=blockers)


def plan_retention(retention: Retention, state: TableState) -> tuple[list[Action], list[Skip]]:
    """Retention drift: the declared retention against the table's properties -> set_properties, and the
    VACUUM of what it would delete now."""
    actions: list[Action] = []
    skips: list[Skip] = []
    wanted = {DELETED: retention.deleted_file_retention}
    if retention.log_retention is not None:
        wanted[LOG] = retention.log_retention
    changes: dict[str, str] = {}
    current: dict[str, str | None] = {}
    for key, secs in wanted.items():
        have = parse_interval(state.properties.get(key))
        effective = have if have is not None else DEFAULTS[key]
        if have is None and secs == DEFAULTS[key]:
            continue  # the default already is what the policy declares
        if effective != secs:
            changes[key] = format_interval(secs)
            current[key] = state.properties.get(key)
    if changes and retention.manage_properties:
        actions.append(SetPropertiesAction(
            precondition=Precondition.of(state.version, ()), properties=changes, current=current,
            reason="table properties drift from the declared retention",
        ))
    elif not changes:
        skips.append(Skip(DeltaSkipReason.RETENTION_IN_SYNC, None, {k: state.properties.get(k) for k in wanted},
                          "table properties match the declared retention"))
    listed = delta_facts(state).vacuum_candidates
    if retention.vacuum.enabled and listed == () and not changes:
        # converged: a table that needs nothing gets no action (plan --detailed-exitcode 0); a plan that
        # changes the retention properties keeps its vacuum (it runs under the new retention)
        skips.append(Skip(DeltaSkipReason.NOTHING_TO_VACUUM, None, {}, "a VACUUM now would delete no file"))
    elif retention.vacuum.enabled:
        hours = vacuum_retention_hours(retention)
        actions.append(VacuumAction(
            precondition=Precondition.of(state.version, listed or ()), retention_hours=hours,
            dry_run_first=retention.vacuum.dry_run_first, files_to_delete=None if listed is None else len(listed),
            files=listed, input_files=len(listed or ()),
            reason=f"delete files removed from the log more than {hours}h ago"
                   + (f" ({len(listed)} file(s) now)" if listed is not None else ""),
        ))
    return actions, skips


def _repair_action(state: TableState) -> RepairAction | None:
    """The repair of rows live twice (formats/delta/duplicates/repair_plan.py), first among the table's actions: a
    repair is applied only from a plan that lists it."""
    dup = delta_facts(state).duplicates
    proposal = dup.proposal
    if proposal is None:
        return None
    removed, restored = dup.rows or (None, None)
    sizes = dict(zip(state.files.column("path").to_pylist(), state.files.column("size_bytes").to_pylist())) \
        if proposal.remove else {}
    paths = (*proposal.remove, *proposal.restore)
    return RepairAction(
        anomalies=proposal.anomalies, chain=proposal.chain, remove=proposal.remove, restore=proposal.restore,
        window_start=dup.window_start, rows_removed=removed, rows_restored=restored,
        input_files=len(proposal.remove), input_bytes=sum(int(sizes.get(p) or 0) for p in proposal.remove),
        expected_output_files=len(proposal.restore), rows=(removed - restored) if removed is not None and restored is not None else None,
        precondition=Precondition.of(state.version, paths),
        reason=(f"rows live twice since version(s) {', '.join(map(str, proposal.anomalies))}: remove "
                f"{len(proposal.remove)} file(s), restore {len(proposal.restore)}; rows proved on the files before "
                "the commit"))


def _rewrite_eligibility(state: TableState, engine: str) -> tuple[pa.Array | None, list[Skip]]:
    """Files compactor's own rewrite on ``engine`` must leave alone, as a mask, with one skip per partition
    holding some:
    - files whose log path delta-rs cannot write back in the same form (Spark writes non-ASCII partition
      values raw; delta-rs encodes them), where delta-rs commits: a remove would match nothing and duplicate
      their rows (compactor's own commit spells each remove as the log spelled its add);
    - files with a deletion vector, on an engine whose rewrite of them is not proved
      (support.REWRITES_DELETION_VECTORS; the local engine's drops the deleted rows and its remove carries
      the descriptor: formats/delta/apply/deletes.py).
    The spark engine's native OPTIMIZE compacts both."""
    paths = state.files.column("path")
    reasons = []
    unremovable = delta_facts(state).unremovable_paths
    if unremovable and not delta_facts(state).compactor_commits:
        reasons.append((pc.is_in(paths, value_set=pa.array(sorted(unremovable), pa.string())),
                        "whose log path delta-rs cannot reproduce (written raw, e.g. non-ASCII characters)"))
    deleted = delta_facts(state).with_deletion_vector
    if deleted and engine not in REWRITES_DELETION_VECTORS:
        reasons.append((pc.is_in(paths, value_set=pa.array(sorted(deleted), pa.string())),
                        "with deletion vectors"))
    if not reasons:
        return None, []
    skips = []
    cols = [f"partition.{c}" for c in state.partition_columns]
    for mask, why in reasons:
        by_partition: dict[tuple[str | None, ...], int] = {}
        for row in state.files.filter(mask).select(cols).to_pylist():
            key = tuple(row[c] for c in cols)
            by_partition[key] = by_partition.get(key, 0) + 1
        skips += [Skip(SkipReason.UNSUPPORTED, dict(zip(state.partition_columns, key)) or None,
                       {"files": n, NEEDS: NATIVE_OPTIMIZE},
                       f"{n} file(s) {why}, which compactor's own rewrite leaves alone")
                  for key, n in sorted(by_partition.items(), key=str)]
    bad = reasons[0][0]
    for mask, _ in reasons[1:]:
        bad = pc.or_(bad, mask)
    return pc.invert(bad), skips


def deleted_rows_ratio(policy: TablePolicy) -> float:
    """The policy's ``max_deleted_rows_ratio``, Delta's default when it sets none."""
    ratio = policy.compaction.triggers.max_deleted_rows_ratio
    return MAX_DELETED_ROWS_RATIO if ratio is None else ratio


def _deletion_candidates(state: TableState, ratio: float) -> pa.Array | None:
    """Files delta-spark OPTIMIZE rewrites whatever their size: a deletion vector deleting more than
    ``ratio`` of its rows (or any DV on a file without a row count). OPTIMIZE still drops a bin of one file
    (OptimizeTableCommand.groupFilesIntoBins keeps single-file bins only for REORG): so does the plan."""
    deleted = delta_facts(state).with_deletion_vector
    if "deleted_rows" not in state.files.column_names or not deleted:
        return None
    rows = state.files.column("num_records")
    dels = state.files.column("deleted_rows")
    ratio_over = pc.greater(pc.divide(pc.cast(dels, pa.float64()), pc.cast(rows, pa.float64())), ratio)
    unknown = pc.and_(pc.greater(dels, 0), pc.is_null(rows))
    return pc.fill_null(pc.or_(ratio_over, unknown), False)


def _config_error(base: TablePlan, state: TableState, msg: str) -> TablePlan:
    return replace(base, files_after=state.file_count, error=msg, skipped=(Skip(SkipReason.INVALID_POLICY, None, {}, msg),))

