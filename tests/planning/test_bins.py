"""The planner packs a partition's files, already in ascending size, as runs (pack_sorted): exactly the
bins of the greedy reference (pack_ascending), ties, empty files and files above the target included."""

from __future__ import annotations

import random

import pytest

from compactor.planning.bins import pack_ascending, pack_sorted


@pytest.mark.parametrize("seed", range(4))
def test_runs_are_the_bins_of_the_greedy_reference(seed: int) -> None:
    rng = random.Random(seed)
    for _ in range(5000):
        sizes = sorted(rng.choice([0, 1, 5, 50, 99, 100, 101, 200, rng.randint(0, 300)])
                       for _ in range(rng.randint(0, 30)))
        target = rng.choice([0, 1, 50, 100, 150, 1000])
        assert [list(range(a, b)) for a, b in pack_sorted(sizes, target)] == pack_ascending(sizes, target), \
            (sizes, target)


def test_examples() -> None:
    assert pack_sorted([], 10) == []
    assert pack_sorted([1, 2, 3, 4], 6) == [(0, 3)]  # 4 alone: dropped
    assert pack_sorted([3, 3, 3, 3], 6) == [(0, 2), (2, 4)]
    assert pack_sorted([7, 8], 6) == []  # each file above the target alone
    assert pack_sorted([0, 0, 5, 5], 5) == [(0, 3)]
