"""Bin packing: which files are rewritten together, one output file per bin.

"delta-spark" (compactor's own rewrite on both engines, and delta-spark's native OPTIMIZE): candidates are
files below min_file_size, sorted by size ascending, greedily packed up to the target; single-file bins
are dropped. Packing in ascending order makes one run converge: every bin closed because the next file did
not fit holds less than the target minus that file, and every later bin's files are at least that large,
so no two outputs (or left-alone files) fit in one bin again.
"""

from __future__ import annotations

from bisect import bisect_right
from collections.abc import Sequence
from itertools import accumulate

BIN_MODELS = ("delta-spark",)


def bins_delta_spark(sizes: Sequence[int], target: int, min_file_size: int,
                     forced: Sequence[bool] | None = None) -> list[list[int]]:
    """Indices of each bin under delta-spark OPTIMIZE semantics (ascending size, greedy). ``forced``:
    files that are candidates whatever their size (a format's rule: OPTIMIZE's for files with deleted rows)."""
    if forced is None:
        candidates = [i for i, s in enumerate(sizes) if s < min_file_size]
    else:
        candidates = [i for i, s in enumerate(sizes) if s < min_file_size or forced[i]]
    return pack_ascending(sizes, target, candidates)


def pack_ascending(sizes: Sequence[int], target: int, candidates: Sequence[int] | None = None) -> list[list[int]]:
    """The packing itself: ``candidates`` (default: every index) sorted by size, ascending and stable
    (equal sizes keep log order), packed greedily up to ``target``; single-file bins dropped."""
    order = sorted(range(len(sizes)) if candidates is None else candidates, key=sizes.__getitem__)
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


def pack_sorted(sizes: Sequence[int], target: int, alone: Sequence[bool] | None = None) -> list[tuple[int, int]]:
    """``pack_ascending`` of sizes already in ascending order, as ``(start, end)`` runs of them: greedy
    packing of sorted sizes only ever closes a bin where the next size does not fit, so every bin is a run,
    and the run from ``start`` ends where the running total first exceeds the target (found by bisection
    on the prefix sums: one step per bin instead of one per file). Single-file bins dropped, but for a file
    ``alone`` marks (a file a format rewrites for its deletes even by itself)."""
    totals = list(accumulate(sizes, initial=0))
    runs = []
    start, n = 0, len(sizes)
    while start < n:
        end = max(start + 1, bisect_right(totals, totals[start] + target, start + 1) - 1)
        if end - start > 1 or (alone is not None and alone[start]):
            runs.append((start, end))
        start = end
    return runs


def plan_bins(model: str, sizes: Sequence[int], target: int, min_file_size: int,
              forced: Sequence[bool] | None = None) -> list[list[int]]:
    if model == "delta-spark":
        return bins_delta_spark(sizes, target, min_file_size, forced)
    raise ValueError(f"unknown bin model {model!r}")
