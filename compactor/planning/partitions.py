"""Partition-level planning (pure): scope, quiet period, triggers, bins, order and budget.

Works columnar: per-partition aggregates come from one pyarrow group-by; Python objects per file are
made only for partitions that pass the cheap checks (their files must be listed in the plan anyway).
"""

from __future__ import annotations

import datetime as dt
import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace
from typing import Any, Protocol, TypedDict

import pyarrow as pa
import pyarrow.compute as pc

from compactor.planning.actions import CompactAction, Precondition, RewriteAction, SortAction, ZOrderAction
from compactor.planning.bins import pack_sorted
from compactor.planning.scope import PartitionFilter
from compactor.planning.skips import Skip, SkipReason
from compactor.policy.model import Compaction
from compactor.policy.predicate import Predicate, _norm
from compactor.units import format_duration, format_setting_size, format_size, format_span

NULL_KEY = "\x00null"
SEP = "\x1f"


class _PartitionStats(TypedDict):
    """One partition's row of the group-by in ``plan_partitions`` (pyarrow names each ``<column>_<function>``)."""

    k: str
    size_sum: int
    size_count: int
    mtime_max: int | None
    mtime_min: int | None
    small_sum: int
    small_size_sum: int | None
    left_alone_sum: int
    forced_sum: int
    over_trigger_sum: int


class _SkipPartition(Protocol):
    """``plan_partitions``' ``skip``: records partition ``k`` as left alone, with its reason and details."""

    def __call__(self, k: str, reason: str, msg: str, **details: Any) -> None: ...


@dataclass
class _Candidate:
    """A partition's action before the budget, with its oldest file's mtime (order ``oldest_first``)."""

    partition: dict[str, str | None]
    action: RewriteAction
    min_mtime: int


def partition_key_column(files: pa.Table, partition_columns: Sequence[str]) -> pa.Array:
    if not partition_columns:
        return pa.array([""] * files.num_rows, pa.string())
    cols = [pc.fill_null(files.column(f"partition.{c}"), NULL_KEY) for c in partition_columns]
    if len(cols) == 1:
        return cols[0].combine_chunks() if isinstance(cols[0], pa.ChunkedArray) else cols[0]
    joined = pc.binary_join_element_wise(*cols, SEP)
    return joined.combine_chunks() if isinstance(joined, pa.ChunkedArray) else joined


def _values_of(key: str, partition_columns: Sequence[str]) -> dict[str, str | None]:
    if not partition_columns:
        return {}
    parts = key.split(SEP) if len(partition_columns) > 1 else [key]
    return {c: (None if v == NULL_KEY else v) for c, v in zip(partition_columns, parts)}


def _sort_key(values: Mapping[str, str | None], columns: Sequence[str]) -> tuple[Any, ...]:
    out = []
    for c in columns:
        v = values.get(c)
        n = _norm(v) if v is not None else None
        out.append((0, 0, "") if v is None else (1, n, "") if isinstance(n, (int, float)) else (2, 0, str(v)))
    return tuple(out)


def _parse_date(value: str | None, fmt: str | None) -> dt.datetime | None:
    if value is None:
        return None
    try:
        if fmt:
            d = dt.datetime.strptime(value, fmt)
        else:
            d = dt.datetime.fromisoformat(value.replace("Z", "+00:00")) if len(value) > 10 else \
                dt.datetime.combine(dt.date.fromisoformat(value), dt.time())
    except ValueError:
        return None
    return d if d.tzinfo else d.replace(tzinfo=dt.UTC)


def plan_partitions(
    files: pa.Table,
    partition_columns: Sequence[str],
    compaction: Compaction,
    *,
    now: dt.datetime,
    bin_model: str,
    version: int | None,
    where: Predicate | None = None,
    eligible: pa.Array | None = None,
    template: RewriteAction | None = None,
    forced: pa.Array | None = None,
    ineligible: tuple[str, str] | None = None,
    scope: PartitionFilter | None = None,
    forced_alone: bool = False,
) -> tuple[list[RewriteAction], list[Skip]]:
    """Actions (one per partition to rewrite) and skips (one per partition left alone, with reason).

    ``eligible``: optional boolean mask; files where it is False are never rewritten (e.g. files the
    format's log does not let it rewrite yet). ``template``: the action each partition's is a copy of, with
    its partition, files and bins (a format's own rewrite with the fields it carries, or the stale action
    `apply --replan-stale` plans again); default: the strategy's (CompactAction / ZOrderAction / SortAction)
    with the compaction's settings. ``forced``: optional boolean mask of files that are candidates whatever
    their size (the format's native compaction rewrites them). ``ineligible``: the skip of a partition whose
    small files are all outside ``eligible`` (its reason and message); None: the caller reported those
    partitions itself (they are not also "already compact": they are not). ``scope``: the format's verdict
    on each partition besides ``where`` and the lookback (a where or lookback it projects through its
    partition transforms: planning/scope.py), a partition out of it skipped with the reason it gives.
    ``forced_alone``: a forced file is rewritten even alone in its bin, and a partition holding one is
    compacted whatever its small files' count and share (a format whose native compaction rewrites a file
    with too many deletes by itself: the rewrite drops them).
    """
    if files.num_rows == 0:
        return [], [Skip(SkipReason.NO_FILES, None, {"files": 0}, "the table has no live files")]
    c = compaction
    now_ms = int(now.timestamp() * 1000)
    keys = partition_key_column(files, partition_columns)
    small = pc.less(files.column("size_bytes"), c.min_file_size)
    if forced is not None:
        small = pc.or_(small, forced)
    small_anywhere = small
    if eligible is not None:
        small = pc.and_(small, eligible)
    alone = None if forced is None or not forced_alone else \
        pc.fill_null(forced if eligible is None else pc.and_(forced, eligible), False)
    agg_input = pa.table({"k": keys, "size": files.column("size_bytes"), "mtime": files.column("modification_time"),
                          "small": pc.cast(small, pa.int64()),
                          "small_size": pc.if_else(small, files.column("size_bytes"), 0),
                          "left_alone": pc.cast(pc.and_(small_anywhere, pc.invert(small)), pa.int64()),
                          "forced": pa.repeat(pa.scalar(0), files.num_rows) if alone is None else
                          pc.cast(alone, pa.int64()),
                          "over_trigger": pa.repeat(pa.scalar(0), files.num_rows) if forced is None else
                          pc.cast(pc.fill_null(pc.and_(forced, small), False), pa.int64())})
    agg = agg_input.group_by("k").aggregate([("size", "sum"), ("size", "count"), ("mtime", "max"),
                                             ("mtime", "min"), ("small", "sum"), ("small_size", "sum"),
                                             ("left_alone", "sum"), ("forced", "sum"),
                                             ("over_trigger", "sum")])
    stats: dict[str, _PartitionStats] = {row["k"]: row for row in agg.to_pylist()}
    all_values = {k: _values_of(k, partition_columns) for k in stats}

    skips: list[Skip] = []
    latest: set[str] = set()
    if c.partitions.skip_latest and partition_columns:
        ordered = sorted(stats, key=lambda k: _sort_key(all_values[k], partition_columns))
        latest = set(ordered[-c.partitions.skip_latest:])

    def skip(k: str, reason: str, msg: str, **details: Any) -> None:
        s = stats[k]
        skips.append(Skip(reason, all_values[k] if partition_columns else None,
                          {"files": s["size_count"], "small_files": s["small_sum"], "bytes": s["size_sum"], **details}, msg))

    survivors: list[str] = []
    lb = c.partitions.lookback
    for k in sorted(stats, key=lambda k: _sort_key(all_values[k], partition_columns)):
        values, s = all_values[k], stats[k]
        if where is not None and not where.evaluate(values, today=now.date()):
            skip(k, SkipReason.OUTSIDE_WHERE, f"not matched by where: {where.text}")
            continue
        if lb is not None:
            d = _parse_date(values.get(lb.column), lb.date_format)
            horizon = now - dt.timedelta(seconds=lb.seconds)
            if d is None or d < horizon.replace(hour=0, minute=0, second=0, microsecond=0):
                skip(k, SkipReason.OUTSIDE_LOOKBACK, f"{lb.column}={values.get(lb.column)} is outside the lookback window",
                     lookback_from=horizon.date().isoformat())
                continue
        outside = scope(values) if scope is not None else None
        if outside is not None:
            skip(k, *outside)
            continue
        if k in latest:
            skip(k, SkipReason.SKIP_LATEST, f"one of the {c.partitions.skip_latest} newest partition(s)")
            continue
        if c.quiet_period and s["mtime_max"] is not None and now_ms - s["mtime_max"] < c.quiet_period * 1000:
            age = max(0, (now_ms - s["mtime_max"]) // 1000)
            eligible_at = (dt.datetime.fromtimestamp(s["mtime_max"] / 1000, dt.UTC)
                           + dt.timedelta(seconds=c.quiet_period)).replace(microsecond=0)
            skip(k, SkipReason.QUIET_PERIOD, f"its newest file is {format_span(age)} old, within quiet_period "
                 f"{format_duration(c.quiet_period)} (a writer may be active): eligible from "
                 f"{eligible_at.isoformat().replace('+00:00', 'Z')} (in {format_span(max(1, c.quiet_period - age))})",
                 newest_file_age_s=age, quiet_period_s=c.quiet_period,
                 eligible_at=eligible_at.isoformat().replace("+00:00", "Z"))
            continue
        if s["small_sum"] == 0 and s["left_alone_sum"]:
            if ineligible is not None:
                skip(k, ineligible[0], ineligible[1])
            continue
        if s["small_sum"] == 0:
            skip(k, SkipReason.ALREADY_COMPACT, f"no file is below min_file_size {format_setting_size(c.min_file_size)}",
                 min_file_size=c.min_file_size)
            continue
        if s["forced_sum"]:  # a file over a delete trigger: rewritten even alone (``forced_alone``)
            survivors.append(k)
            continue
        ideal = max(1, math.ceil((s["small_size_sum"] or 0) / c.target_file_size))
        # a file over a delete trigger may be larger than the target: with two candidates or more the bins alone
        # tell (no two share one: already compact, below), as OPTIMIZE packs them
        if s["small_sum"] <= ideal and not (s["over_trigger_sum"] and s["small_sum"] > 1):
            # e.g. a partition compacted into one file that is still below min_file_size: nothing to gain
            skip(k, SkipReason.ALREADY_COMPACT, f"{s['small_sum']} small file(s) holding "
                 f"{format_size(s['small_size_sum'])}: already the fewest files at target_file_size "
                 f"{format_setting_size(c.target_file_size)}", ideal_files=ideal,
                 target_file_size=c.target_file_size)
            continue
        if s["small_sum"] < c.triggers.min_input_files:
            skip(k, SkipReason.BELOW_MIN_INPUT_FILES, f"{s['small_sum']} small file(s) < min_input_files {c.triggers.min_input_files}",
                 min_input_files=c.triggers.min_input_files)
            continue
        ratio = s["small_sum"] / s["size_count"]
        if ratio < c.triggers.min_small_file_ratio:
            skip(k, SkipReason.BELOW_MIN_SMALL_FILE_RATIO, f"small-file ratio {ratio:.2f} < {c.triggers.min_small_file_ratio}",
                 small_file_ratio=round(ratio, 4), min_small_file_ratio=c.triggers.min_small_file_ratio)
            continue
        survivors.append(k)

    candidates = _build_actions(files, keys, survivors, stats, all_values, partition_columns, c, bin_model,
                                version, eligible, skip, template, small, alone)
    return _apply_budget(candidates, c, skips)


def _build_actions(files: pa.Table, keys: pa.Array, survivors: Sequence[str], stats: Mapping[str, _PartitionStats],
                   all_values: Mapping[str, dict[str, str | None]], partition_columns: Sequence[str], c: Compaction,
                   bin_model: str, version: int | None, eligible: pa.Array | None, skip: _SkipPartition,
                   template: RewriteAction | None, candidate: pa.Array, alone: pa.Array | None) -> list[_Candidate]:
    """``candidate``: the mask of files a bin may take (small or forced, and eligible); ``alone``: those
    rewritten even alone in a bin (``plan_partitions``' ``forced_alone``). Bin-packing needs
    only those, so only those become Python objects (a quarter of a table's files, typically); z-order
    and sort rewrite whole partitions and take every eligible file."""
    if not survivors:
        return []
    wanted = pc.is_in(keys, value_set=pa.array(survivors, pa.string()))
    if c.strategy == "bin_pack":
        wanted = pc.and_(wanted, candidate)
    elif eligible is not None:
        wanted = pc.and_(wanted, eligible)
    idx = pc.indices_nonzero(wanted)
    sub_keys = keys.take(idx)
    # arrow's sort is stable (log order kept inside a partition) and orders UTF-8 like Python's str;
    # bin-packing takes a partition's files in ascending size (equal sizes in log order): sorted here
    if c.strategy == "bin_pack":
        by = pa.table({"k": sub_keys, "size": files.column("size_bytes").take(idx)})
        order = idx.take(pc.sort_indices(by, sort_keys=[("k", "ascending"), ("size", "ascending")]))
    else:
        order = idx.take(pc.sort_indices(sub_keys))
    counts = {row["k"]: row["k_count"] for row in pa.table({"k": sub_keys}).group_by("k").aggregate(
        [("k", "count")]).to_pylist()}
    paths = files.column("path").take(order).to_pylist()
    sizes = files.column("size_bytes").take(order).to_pylist()
    lone = alone.take(order).to_pylist() if alone is not None else [False] * len(paths)
    live = files.column("num_records")
    if "deleted_rows" in files.column_names:  # rows marked deleted are no rows readers see (TableState)
        live = pc.subtract(live, pc.fill_null(files.column("deleted_rows"), 0))
    records = live.take(order).to_pylist()
    out: list[_Candidate] = []
    base = template or _settings(c)
    start = 0
    for k in sorted(survivors):
        end = start + counts.get(k, 0)
        p_paths, p_sizes, p_rec, p_lone = paths[start:end], sizes[start:end], records[start:end], lone[start:end]
        start = end
        values = all_values[k]
        if c.strategy == "bin_pack":  # the partition's files are in ascending size: bins are runs of them
            runs = pack_sorted(p_sizes, c.target_file_size, p_lone if stats[k]["forced_sum"] else None)
            if not runs:
                skip(k, SkipReason.ALREADY_COMPACT, "no two small files can share a bin", target_file_size=c.target_file_size)
                continue
            outputs = len(runs)
            reason = (f"bin-pack {sum(b - a for a, b in runs)} file(s) into {outputs} at target "
                      f"{format_setting_size(c.target_file_size)} (packed as {bin_model}'s OPTIMIZE packs them)")
            purged = sum(1 for a, b in runs for x in p_lone[a:b] if x)
            if purged:
                reason += f"; {purged} of them over a delete trigger (rewritten to drop their deletes, even alone)"
        else:
            runs = [(0, len(p_sizes))]
            outputs = max(1, math.ceil(sum(p_sizes) / c.target_file_size))
            cols = ", ".join(c.z_order_by if c.strategy == "z_order" else c.sort_by)
            reason = f"{c.strategy} by ({cols}): rewrites the whole partition ({len(p_sizes)} files) every run"
        n_in = sum(b - a for a, b in runs)
        reduction = n_in - outputs
        if reduction <= c.triggers.min_file_reduction and not any(p_lone):
            skip(k, SkipReason.BELOW_MIN_FILE_REDUCTION, f"would remove only {reduction} file(s) (min_file_reduction "
                 f"{c.triggers.min_file_reduction})", predicted_files_after=stats[k]["size_count"] - reduction,
                 min_file_reduction=c.triggers.min_file_reduction)
            continue
        # slices, not per-file loops: this runs once per input file (1M at scale)
        bins = tuple(tuple(p_paths[a:b]) for a, b in runs)
        in_bytes = sum(sum(p_sizes[a:b]) for a, b in runs)
        rec = [r for a, b in runs for r in p_rec[a:b]]
        in_paths = [p for b in bins for p in b]
        action = replace(
            base, partition=values, input_files=n_in, input_bytes=in_bytes,
            expected_output_files=outputs, expected_output_bytes=in_bytes, rows=None if None in rec else sum(rec),
            precondition=Precondition.of(version, in_paths), bins=bins, reason=reason, bin_model=bin_model)
        out.append(_Candidate(values, action, stats[k]["mtime_min"] or 0))
    return out


def _settings(c: Compaction) -> RewriteAction:
    """The strategy's rewrite with the compaction's settings (the template of each partition's)."""
    ratio = c.triggers.max_deleted_rows_ratio
    if c.strategy == "z_order":
        return ZOrderAction(target_file_size=c.target_file_size, min_file_size=c.min_file_size, method=c.method,
                            z_order_by=tuple(c.z_order_by), max_deleted_rows_ratio=ratio)
    if c.strategy == "sort":
        return SortAction(target_file_size=c.target_file_size, min_file_size=c.min_file_size, method=c.method,
                          sort_by=tuple(c.sort_by), max_deleted_rows_ratio=ratio)
    return CompactAction(target_file_size=c.target_file_size, min_file_size=c.min_file_size, method=c.method,
                         max_deleted_rows_ratio=ratio)


def _apply_budget(cands: list[_Candidate], c: Compaction, skips: list[Skip]) -> tuple[list[RewriteAction], list[Skip]]:
    def benefit(x: _Candidate) -> float:
        a = x.action
        return (a.input_files - a.expected_output_files) / max(1, a.input_bytes)

    keyf = {
        "benefit": lambda x: -benefit(x),
        "bytes_asc": lambda x: x.action.input_bytes,
        "bytes_desc": lambda x: -x.action.input_bytes,
        "oldest_first": lambda x: x.min_mtime,
    }[c.order]
    cands.sort(key=keyf)
    actions: list[RewriteAction] = []
    used = 0
    max_b, max_p = c.budget.max_bytes_per_run, c.budget.max_partitions_per_run
    for x in cands:
        a = x.action
        if max_p is not None and len(actions) >= max_p:
            skips.append(Skip(SkipReason.BUDGET, x.partition, {"input_bytes": a.input_bytes, "max_partitions_per_run": max_p,
                                                      "input_files": a.input_files},
                              f"max_partitions_per_run {max_p} reached"))
            continue
        if max_b is not None and used + a.input_bytes > max_b:
            skips.append(Skip(SkipReason.BUDGET, x.partition, {"input_bytes": a.input_bytes, "max_bytes_per_run": max_b,
                                                      "bytes_already_planned": used, "input_files": a.input_files},
                              "does not fit in max_bytes_per_run"))
            continue
        used += a.input_bytes
        actions.append(a)
    return actions, skips
