"""Plan one Delta table (PURE): which engines can rewrite it, scoping, partitions, retention."""

from __future__ import annotations

import datetime as dt
from typing import Any

import pyarrow as pa
import pyarrow.compute as pc

from compactor.models.state import TableState
from compactor.planning.actions import REWRITE_ACTIONS
from compactor.planning.partitions import plan_partitions
from compactor.planning.plan import Skip, TablePlan
from compactor.planning.retention import plan_retention
from compactor.policy.model import TablePolicy
from compactor.policy.predicate import PredicateError, parse_where

#: writer features delta-rs 1.6 cannot write (its commits would corrupt or be refused)
DELTA_RS_UNWRITABLE = frozenset({
    "clustering", "liquid", "rowTracking", "domainMetadata", "inCommitTimestamp", "identityColumns",
    "typeWidening", "typeWidening-preview", "catalogManaged", "catalogOwned-preview", "icebergCompatV1",
    "icebergCompatV2", "icebergWriterCompatV1", "variantType", "variantType-preview",
})
#: features whose data files compactor's own rewrite cannot copy as they are
UNREWRITABLE = frozenset({"deletionVectors", "columnMapping"})
#: the bin model of compactor's own rewrite (both engines): the same greedy, ascending-size packing as
#: delta-spark OPTIMIZE, so native OPTIMIZE and the rewrite produce the same files
BIN_MODEL = "delta-spark"


def unsupported_reason(state: TableState, engine: str) -> str | None:
    feats = set(state.protocol.writer_features) | set(state.protocol.reader_features)
    bad = sorted(feats & DELTA_RS_UNWRITABLE)
    if bad:
        return f"writer feature(s) {', '.join(bad)} cannot be written by delta-rs, which commits compactor's changes"
    bad = sorted(feats & UNREWRITABLE)
    if state.properties.get("delta.columnMapping.mode", "none") not in ("none", None):
        bad = sorted(set(bad) | {"columnMapping"})
    if bad:
        return f"table uses {', '.join(bad)}: its data files cannot be rewritten safely by compactor"
    return None


def plan_delta_table(policy: TablePolicy, state: TableState, *, now: dt.datetime, engine: str) -> TablePlan:
    base: dict[str, Any] = dict(
        name=policy.name, path=state.uri, format=policy.format, engine=engine, version=state.version,
        bin_model=BIN_MODEL, partition_columns=state.partition_columns, files_before=state.file_count,
        bytes_before=state.total_bytes, policy_source=str(policy.source),
        duplicate_rewrite=tuple(state.extra.get("duplicates") or ()))
    if not policy.enabled:
        return TablePlan(**base, files_after=state.file_count,
                         skipped=(Skip("disabled", None, {}, "table policy has enabled: false"),))
    reason = unsupported_reason(state, engine)
    if reason:
        return TablePlan(**base, files_after=state.file_count, skipped=(Skip("unsupported", None, {}, reason),))
    c = policy.compaction
    where = None
    if c.partitions.where:
        try:
            where = parse_where(c.partitions.where)
        except PredicateError as e:
            return _config_error(base, state, f"{policy.location('compaction.partitions.where')}: {e}")
        extra = sorted(where.columns - set(state.partition_columns))
        if extra:
            return _config_error(base, state, (
                f"{policy.location('compaction.partitions.where')}: where references non-partition column(s) "
                f"{', '.join(extra)}; partition columns are: {', '.join(state.partition_columns) or '(none)'}"))
    lb = c.partitions.lookback
    if lb is not None and lb.column not in state.partition_columns:
        return _config_error(base, state, f"{policy.location('compaction.partitions.lookback')}: lookback column "
                             f"'{lb.column}' is not a partition column ({', '.join(state.partition_columns) or 'none'})")
    actions: list[Any] = []
    skips: list[Skip] = []
    files = state.files
    carriers = state.extra.get("duplicate_carriers") or ()
    if carriers:  # the repair removes these: never plan them as inputs
        files = files.filter(pc.invert(pc.is_in(files.column("path"), value_set=pa.array(list(carriers), pa.string()))))
    if c.enabled:
        acts, sk = plan_partitions(files, state.partition_columns, c, now=now, bin_model=BIN_MODEL,
                                   version=state.version, where=where)
        actions += acts
        skips += sk
    else:
        skips.append(Skip("disabled", None, {}, "compaction.enabled is false"))
    if policy.retention is not None:
        acts, sk = plan_retention(policy.retention, state)
        actions += acts
        skips += sk
    removed = sum(a.input_files - a.expected_output_files for a in actions if a.type in REWRITE_ACTIONS)
    return TablePlan(**base, actions=tuple(actions), skipped=tuple(skips), files_after=state.file_count - removed)


def _config_error(base: dict, state: TableState, msg: str) -> TablePlan:
    return TablePlan(**base, files_after=state.file_count, error=msg, skipped=(Skip("invalid_policy", None, {}, msg),))

