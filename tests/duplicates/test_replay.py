"""The duplicate replay and repair plan (formats/delta/duplicates.py) on an in-memory log: every
scenario of the issue, and random histories of racing compactions with repairs that race too."""

from __future__ import annotations

import random

import pytest

from compactor.formats.delta.duplicates import analyse, repair_plan
from tests.duplicates.model import Log, random_history


def _check_plan_rows(log: Log, plan) -> None:
    """The two row checks the repair makes before committing (formats/delta/repair.py)."""
    rows = log.row_counts()
    assert sum(rows[p] for p in plan.remove) == sum(rows[p] for _, p in plan.consumed)


def repair(log: Log) -> int | None:
    a = analyse(log.commits)
    if not a.open:
        return None
    plan = repair_plan(a, log.live)
    assert not plan.unrepairable
    _check_plan_rows(log, plan)
    return log.apply_repair(plan)


def test_two_compactions_of_the_same_files() -> None:
    log = Log()
    files = [log.append() for _ in range(4)]
    first = log.rewrite(files)
    second = log.rewrite(files)  # from the same stale snapshot
    assert len(log.duplicated()) == 12
    (d,) = analyse(log.commits).open
    assert (d.earlier_versions, d.later, d.files) == ([first], second, sorted(files))
    repair(log)
    assert log.duplicated() == []
    assert analyse(log.commits).open == [] and analyse(log.commits).duplicates[0].status == "repaired"


def test_partial_overlap_restores_the_files_only_the_later_commit_removed() -> None:
    log = Log()
    files = [log.append() for _ in range(6)]
    log.rewrite(files[:2])
    log.rewrite(files)  # removed all six, two of them again
    (d,) = analyse(log.commits).open
    assert d.files == sorted(files[:2])
    plan = repair_plan(analyse(log.commits), log.live)
    assert set(plan.restore) == set(files[2:])
    repair(log)
    assert log.duplicated() == [] and sorted(log.rows()) == list(range(18))


def test_three_way_overlap_converges_in_one_repair() -> None:
    log = Log()
    files = [log.append() for _ in range(3)]
    extra = log.append()
    log.rewrite(files)
    log.rewrite(files + [extra])
    log.rewrite(files + [extra])
    assert len(analyse(log.commits).open) == 2
    repair(log)
    assert log.duplicated() == [] and sorted(log.rows()) == list(range(12))
    assert repair(log) is None  # a second repair is a no-op


def test_a_rewrite_that_removes_a_file_re_added_by_a_repair_is_legitimate() -> None:
    log = Log()
    files = [log.append() for _ in range(4)]
    log.rewrite(files[:2])
    log.rewrite(files)  # duplicate of the first two
    repair(log)  # re-adds files[2:]
    assert set(files[2:]) <= log.live
    log.rewrite(files[2:])  # compacting the re-added files again is fine
    assert analyse(log.commits).open == [] and log.duplicated() == []


def test_a_compaction_of_the_extra_copy_is_reverted_with_it() -> None:
    """The duplicate propagated: another compaction rewrote the extra copy with a fresh file."""
    log = Log()
    files = [log.append() for _ in range(3)]
    log.rewrite(files)
    log.rewrite(files)
    fresh = log.append()
    extra = sorted(analyse(log.commits).open[0].extra)
    log.rewrite(extra + [fresh])
    (d,) = analyse(log.commits).open
    assert len(d.chain) == 2
    plan = repair_plan(analyse(log.commits), log.live)
    assert fresh in plan.restore
    repair(log)
    assert log.duplicated() == [] and sorted(log.rows()) == list(range(12))


def test_racing_repairs_converge_and_are_not_duplicates_themselves() -> None:
    log = Log()
    files = [log.append() for _ in range(4)]
    log.rewrite(files[:2])
    log.rewrite(files)
    plan = repair_plan(analyse(log.commits), log.live)
    log.apply_repair(plan)
    log.apply_repair(plan)  # a second repair planned on the same view commits too
    a = analyse(log.commits)
    assert a.open == [] and log.duplicated() == []


def test_a_stale_repair_that_resurrects_a_rewritten_file_is_found_and_repaired() -> None:
    log = Log()
    files = [log.append() for _ in range(4)]
    log.rewrite(files[:2])
    log.rewrite(files)
    plan = repair_plan(analyse(log.commits), log.live)  # would re-add files[2:]
    log.rewrite(sorted(analyse(log.commits).open[0].extra))  # meanwhile: hmm, someone compacts the copy
    log.apply_repair(plan)  # stale: the copy it removes is gone, the files it restores are fine
    repair(log)
    assert log.duplicated() == []
    # now the resurrection proper: a repair re-adds a file another compaction has rewritten since
    log2 = Log()
    files = [log2.append() for _ in range(4)]
    log2.rewrite(files[:2])
    log2.rewrite(files)
    plan = repair_plan(analyse(log2.commits), log2.live)
    log2.apply_repair(plan)
    log2.rewrite(files[2:])  # a legitimate compaction of the re-added files
    log2.apply_repair(plan)  # a stale copy of the repair re-adds them again
    a = analyse(log2.commits)
    assert [d.kind for d in a.open] == ["resurrection"] and log2.duplicated()
    repair(log2)
    assert log2.duplicated() == [] and analyse(log2.commits).open == []


def test_the_later_of_two_duplicates_that_share_a_commit() -> None:
    """B doubles A on f; C doubles B on h: reverting B alone fixes both (C is then the only copy)."""
    log = Log()
    f, g, h, k = (log.append() for _ in range(4))
    log.rewrite([f, g])
    b = log.rewrite([f, h])
    log.rewrite([h, k])
    assert [d.later for d in analyse(log.commits).open] == [b, b + 1]
    repair(log)
    assert log.duplicated() == [] and sorted(log.rows()) == list(range(12))


def test_data_changing_commits_are_not_duplicates() -> None:
    """delta-rs and delta-spark refuse DELETE/UPDATE/MERGE over a concurrent compaction (measured); if a
    log had one anyway, it is not a rewrite and not reported as one."""
    log = Log()
    files = [log.append() for _ in range(3)]
    log.rewrite(files)
    log.rewrite(files, data_change=True)
    assert analyse(log.commits).open == []


def test_a_window_that_starts_after_the_first_removal_does_not_invent_duplicates() -> None:
    log = Log()
    files = [log.append() for _ in range(4)]
    log.rewrite(files[:2])
    log.rewrite(files)
    assert analyse(log.commits[-1:]).open == []  # the first removal is outside the window
    assert len(analyse(log.commits[-2:]).open) == 1


def _race(rng: random.Random, log: Log, stale: float) -> None:
    """Repairs (sometimes two of the same plan, sometimes planned before a rewrite of the very files they
    touch lands: the window the pre-commit re-check cannot close) interleaved with more rewrites."""
    for _ in range(rng.randint(0, 3)):
        a = analyse(log.commits)
        if a.open:
            plan = repair_plan(a, log.live)
            if plan.unrepairable:
                return
            if rng.random() < stale:
                log.rewrite(rng.sample(sorted(log.live), min(2, len(log.live))))
            log.apply_repair(plan)
            if rng.random() < 0.3:
                log.apply_repair(plan)
        for _ in range(rng.randint(0, 4)):
            view = sorted(log.live)
            if len(view) >= 2:
                log.rewrite(rng.sample(view, rng.randint(2, min(4, len(view)))))


@pytest.mark.parametrize("seed", range(200))
def test_random_histories_end_with_every_row_once(seed: int) -> None:
    """Random appends and compactions from stale snapshots (a duplicate at almost every step), repairs
    racing each other and more compactions: repairing until clean leaves every row exactly once.
    (3000 seeds pass; 200 keep the suite fast.)"""
    rng = random.Random(seed)
    log = random_history(rng, steps=rng.randint(5, 60))
    rows = set(log.rows())
    _race(rng, log, stale=0.0)
    for _ in range(6):
        if repair(log) is None:
            break
    assert analyse(log.commits).open == []
    assert log.duplicated() == [], f"seed {seed}"
    assert set(log.rows()) == rows


@pytest.mark.parametrize("seed", range(100))
def test_a_stale_repair_never_makes_the_repair_lose_rows(seed: int) -> None:
    """With repairs committed on a stale view, the next repair either converges or refuses (the
    other copy is incomplete, or the rows do not add up): it never removes the last copy of a row."""
    rng = random.Random(seed)
    log = random_history(rng, steps=rng.randint(5, 60))
    rows = set(log.rows())
    _race(rng, log, stale=0.5)
    for _ in range(6):
        a = analyse(log.commits)
        if not a.open:
            break
        plan = repair_plan(a, log.live)
        counts = log.row_counts()
        if plan.unrepairable or sum(counts[p] for p in plan.remove) != sum(counts[p] for _, p in plan.consumed):
            break  # refused: reported, nothing committed
        log.apply_repair(plan)
    assert set(log.rows()) == rows, f"seed {seed}: rows lost"
    if not analyse(log.commits).open:
        assert log.duplicated() == []
