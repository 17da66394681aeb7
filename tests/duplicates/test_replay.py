"""The lineage replay (formats/delta/duplicates/lineage.py) and the repair proposal (repair_plan.py) on an
in-memory log (tests/duplicates/model.py) whose oracle knows every file's rows: every scenario of the
issue, and random histories of appends, deletes, updates, RESTOREs and racing compactions."""

from __future__ import annotations

import random

import pytest

from compactor.formats.delta.duplicates.lineage import analyse
from compactor.formats.delta.duplicates.repair_plan import RepairProposal, propose
from tests.duplicates.model import Log, random_history


def test_finding1_delete_then_restore_is_not_a_duplicate() -> None:
    """Audit finding 1: append A, append B, a DELETE of every row of A, RESTORE to version 1, then a
    compaction of A and B. The RESTORE re-adds A (an adds-only commit): A is live, so the compaction's
    remove of A is an ordinary one, and nothing is duplicated."""
    log = Log()
    a = log.append(5)
    b = log.append(5)
    log.delete(lambda i: i < 5)
    log.restore(1)
    log.rewrite([a, b])
    lineage = analyse(log.commits)
    assert lineage.anomalies == []
    assert propose(lineage) is None
    assert log.rows() == log.expected


def test_two_compactions_of_the_same_files() -> None:
    log = Log()
    files = [log.append() for _ in range(4)]
    first = log.rewrite(files)
    second = log.rewrite(files)  # from the same stale snapshot
    assert len(log.duplicated()) == 12
    (a,) = analyse(log.commits).open
    assert (a.kind, a.version, a.earlier_versions, sorted(a.excess)) == ("double_remove", second, [first], sorted(files))
    log.repair()
    assert log.rows() == log.expected
    (a,) = analyse(log.commits).anomalies
    assert a.status == "repaired" and a.repaired_by == log.version


def test_partial_overlap_restores_the_files_only_the_later_commit_removed() -> None:
    log = Log()
    files = [log.append() for _ in range(6)]
    log.rewrite(files[:2])
    log.rewrite(files)  # removed all six, two of them again
    plan = propose(analyse(log.commits))
    assert plan is not None and set(plan.restore) == set(files[2:]) and {p for _, p in plan.excess} == set(files[:2])
    log.repair()
    assert log.rows() == log.expected


def test_three_way_overlap_converges_in_one_repair() -> None:
    log = Log()
    files = [log.append() for _ in range(3)]
    log.append()
    log.rewrite(files)
    log.rewrite(files)
    log.rewrite(files)
    assert len(analyse(log.commits).open) == 2
    log.repair()
    assert log.rows() == log.expected and analyse(log.commits).current == []


def test_a_compaction_of_the_extra_copy_is_reverted_with_it() -> None:
    log = Log()
    files = [log.append() for _ in range(3)]
    other = log.append()
    log.rewrite(files)
    dup = log.rewrite(files)
    extra = next(iter(log.commits[dup].adds))
    chained = log.rewrite([extra, other])  # someone compacts the extra copy with a legitimate file
    plan = propose(analyse(log.commits))
    assert plan is not None and plan.chain == (dup, chained) and other in plan.restore
    log.repair()
    assert log.rows() == log.expected


def test_repair_with_copies_is_understood_by_the_next_replay() -> None:
    """Rows restored into new files (the tombstones were too old to re-add): the copies hold the
    originals' rows and carry nothing; the next replay finds the table clean."""
    log = Log()
    files = [log.append() for _ in range(4)]
    log.rewrite(files[:2])
    log.rewrite(files)
    log.repair(copies=True)
    assert log.rows() == log.expected
    lineage = analyse(log.commits)
    assert lineage.current == [] and lineage.anomalies[0].status == "repaired"
    log.rewrite(sorted(log.live))  # the copies compact like any file
    assert analyse(log.commits).current == [] and log.rows() == log.expected


def test_a_repair_that_raced_a_rewrite_is_found_and_reverted() -> None:
    log = Log()
    files = [log.append() for _ in range(4)]
    log.rewrite(files[:2])
    log.rewrite(files)
    plan = propose(analyse(log.commits))
    assert plan is not None
    log.rewrite(list(plan.remove))  # another compaction of the carriers commits first
    stale = log.apply_repair(plan)  # compactor's repair, planned before it, commits after
    lineage = analyse(log.commits)
    assert {a.kind for a in lineage.open} >= {"stale_repair"}
    assert next(a for a in lineage.anomalies if a.version == stale).kind == "stale_repair"
    log.repair()
    assert log.rows() == log.expected and analyse(log.commits).current == []


def test_a_readd_of_a_rewritten_file_is_an_extra_copy() -> None:
    log = Log()
    files = [log.append() for _ in range(3)]
    log.rewrite(files)
    v = log.readd(files[0])
    (a,) = analyse(log.commits).open
    assert (a.kind, a.version, list(a.excess)) == ("readd", v, [files[0]])
    log.repair()
    assert log.rows() == log.expected


def test_a_data_change_through_the_extra_copy_makes_it_unrepairable() -> None:
    log = Log()
    files = [log.append() for _ in range(3)]
    log.rewrite(files)
    log.rewrite(files)
    log.update(lambda i: i == 0)  # rewrites both copies of row 0's files
    lineage = analyse(log.commits)
    assert [a.status for a in lineage.anomalies] == ["unrepairable"]
    assert "changed data" in lineage.anomalies[0].reason
    assert propose(lineage) is None  # nothing open: compactor reports it and touches nothing


def test_deleting_the_extra_copy_and_restoring_before_it() -> None:
    log = Log()
    files = [log.append() for _ in range(3)]
    before = log.version
    log.rewrite(files)
    log.rewrite(files)
    after = log.version
    log.restore(before)  # back to before both compactions: nothing is duplicated
    assert [a.status for a in analyse(log.commits).anomalies] == ["gone"] and log.rows() == log.expected
    log.restore(after)  # and forward again: the duplicate is back, and open
    assert [a.status for a in analyse(log.commits).anomalies] == ["open"]
    log.repair()
    assert log.rows() == log.expected


def test_a_window_that_starts_after_the_first_removal_does_not_invent_duplicates() -> None:
    log = Log()
    files = [log.append() for _ in range(4)]
    log.rewrite(files)
    log.append()
    # the window starts after the appends: their first action in it is a remove
    assert analyse(log.commits[4:]).anomalies == []


def _data_change(rng: random.Random, log: Log, *, restores: bool = True) -> None:
    r = rng.random() if restores else rng.random() * 0.85
    if r < 0.45 or len(log.live) < 2:
        log.append(rng.randint(1, 4))
    elif r < 0.65:
        cut = rng.randint(0, 6)
        log.delete(lambda i: i % 7 == cut)
    elif r < 0.85:
        cut = rng.randint(0, 6)
        log.update(lambda i: i % 7 == cut)
    else:
        log.restore(rng.randint(0, log.version))


def _compaction(rng: random.Random, log: Log, *, stale: bool) -> None:
    read = max(0, log.version - (rng.randint(0, 3) if stale else 0))
    view = sorted(log.live_at[read])
    if len(view) >= 2:
        inputs = rng.sample(view, rng.randint(2, len(view)))
        if not log.conflicts(inputs, read):
            log.rewrite(inputs, outputs=rng.randint(1, 2))


def _ops(rng: random.Random, log: Log, *, stale: bool) -> None:
    if rng.random() < 0.55 or len(log.live) < 2:
        _data_change(rng, log)
    else:
        _compaction(rng, log, stale=stale)


def _repair_all(log: Log) -> RepairProposal | None:
    """Repairs until nothing is open; returns the proposal compactor refused (planning or content
    check), if any."""
    while (plan := propose(analyse(log.commits))) is not None:
        if not plan.repairable or log.content_check(plan) is not None:
            return plan
        log.apply_repair(plan)
    return None


@pytest.mark.parametrize("seed", range(300))
def test_histories_without_races_never_show_a_duplicate(seed: int) -> None:
    """No false positives: every compaction reads the current table, and whatever the appends,
    deletes, updates and RESTOREs around it, the replay finds nothing."""
    rng = random.Random(seed)
    log = Log()
    for _ in range(40):
        _ops(rng, log, stale=False)
    lineage = analyse(log.commits)
    assert lineage.anomalies == [], [(a.kind, a.version, a.status) for a in lineage.anomalies]
    assert log.rows() == log.expected


@pytest.mark.parametrize("seed", range(300))
def test_racing_histories_repaired_before_each_data_change_end_with_the_oracles_rows(seed: int) -> None:
    """Compactions read snapshots up to three versions old (the delta-rs hazard); as a deploy pipeline
    would, compactor plans and repairs before the next data-changing operation (appends, deletes,
    updates), which therefore never touches an extra copy. Every history ends with the oracle's rows."""
    rng = random.Random(seed)
    log = Log()
    for _ in range(40):
        if rng.random() < 0.5 or len(log.live) < 2:
            assert _repair_all(log) is None
            _data_change(rng, log, restores=False)
        else:
            _compaction(rng, log, stale=True)
    assert _repair_all(log) is None
    assert log.rows() == log.expected
    assert analyse(log.commits).current == []


def test_a_restore_to_a_duplicated_version_is_repaired_or_refused_never_guessed() -> None:
    """A RESTORE to a version that held an extra copy brings the copy back under files a later repair
    already answered. compactor repairs what it can prove and refuses the rest (the plan names the
    table and why); across 300 racing histories with RESTOREs, no repair loses a row, most converge to
    the oracle, and each refusal leaves every row live."""
    refused = 0
    for seed in range(300):
        rng = random.Random(seed)
        log = Log()
        for _ in range(40):
            if rng.random() < 0.5 or len(log.live) < 2:
                if _repair_all(log) is not None:
                    break
                _data_change(rng, log)
            else:
                _compaction(rng, log, stale=True)
        refusal = _repair_all(log)
        assert not set(log.expected) - set(log.rows()), seed
        if refusal is None:
            assert log.rows() == log.expected, seed
        else:
            refused += 1
            assert analyse(log.commits).current, seed
    assert refused < 30, refused


@pytest.mark.parametrize("seed", range(200))
def test_random_racing_compactions_end_with_every_row_once(seed: int) -> None:
    rng = random.Random(seed)
    log = random_history(rng)
    for _ in range(4):
        if log.repair(copies=bool(rng.getrandbits(1))) is None:
            break
    assert log.rows() == log.expected
    assert analyse(log.commits).current == []


@pytest.mark.parametrize("seed", range(200))
def test_a_proposal_that_passes_the_content_check_never_loses_a_row(seed: int) -> None:
    """Whatever the history (races, data changes, RESTOREs in between), a repair that passes the content
    check leaves every row of the oracle live at least once."""
    rng = random.Random(seed)
    log = Log()
    for _ in range(35):
        _ops(rng, log, stale=True)
        if rng.random() < 0.15:
            plan = propose(analyse(log.commits))
            if plan is not None and plan.repairable and log.content_check(plan) is None:
                lost_before = set(log.expected) - set(log.rows())
                log.apply_repair(plan)
                assert set(log.expected) - set(log.rows()) <= lost_before
