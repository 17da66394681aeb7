"""Bin-packing models: predict exactly which files each engine rewrites together.

- "delta-rs" (local engine, delta-rs 1.6 optimize.compact): per partition, files in log order (the
  order of get_add_actions); files larger than the target are skipped but still break contiguity; a bin
  is a contiguous run whose total stays <= target; single-file bins are dropped.
- "delta-spark" (spark engine, our own rewrite and native OPTIMIZE): candidates are files below
  min_file_size, sorted by size ascending, greedily packed up to the target; single-file bins dropped.
"""

from __future__ import annotations

from typing import Sequence

BIN_MODELS = ("delta-rs", "delta-spark")


def bins_delta_rs(sizes: Sequence[int], target: int) -> list[list[int]]:
    """Indices (into sizes, in log order) of each bin delta-rs 1.6 would rewrite."""
    bins: list[list[int]] = []
    cur: list[int] = []
    cur_size = 0
    last = -2
    for i, size in enumerate(sizes):
        if size > target:
            continue
        if cur and last == i - 1 and cur_size + size <= target:
            cur.append(i)
            cur_size += size
        else:
            if len(cur) > 1:
                bins.append(cur)
            cur, cur_size = [i], size
        last = i
    if len(cur) > 1:
        bins.append(cur)
    return bins


def bins_delta_spark(sizes: Sequence[int], target: int, min_file_size: int) -> list[list[int]]:
    """Indices of each bin under delta-spark OPTIMIZE semantics (ascending size, greedy)."""
    order = sorted((i for i, s in enumerate(sizes) if s < min_file_size), key=lambda i: (sizes[i], i))
    bins: list[list[int]] = []
    cur: list[int] = []
    cur_size = 0
    for i in order:
        if cur and cur_size + sizes[i] > target:
            if len(cur) > 1:
                bins.append(cur)
            cur, cur_size = [], 0
        cur.append(i)
        cur_size += sizes[i]
    if len(cur) > 1:
        bins.append(cur)
    return bins


def plan_bins(model: str, sizes: Sequence[int], target: int, min_file_size: int) -> list[list[int]]:
    if model == "delta-rs":
        return bins_delta_rs(sizes, target)
    if model == "delta-spark":
        return bins_delta_spark(sizes, target, min_file_size)
    raise ValueError(f"unknown bin model {model!r}")
