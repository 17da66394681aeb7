"""The Iceberg fuzzer (issue 39): seeded random histories on a real pyiceberg table in a SQL catalog on sqlite,
other writers' operations interleaved with compactor's local engine (no JVM), checked against an oracle of
the rows each snapshot holds (tests/fuzz/iceberg_history.py: the writers and the oracle; iceberg_steps.py:
compactor's steps and their checks; iceberg_checks.py: what pyiceberg reads of the table).

After every operation: the current snapshot's rows are the oracle's, every file any snapshot's manifests
name exists, time travel to the snapshots it made (to every snapshot after a compactor apply) returns their
oracle's rows; after a compactor apply only the planned files left the current snapshot. At the end
plan -> apply -> plan converges, for the compaction and for the retention.

CI runs ``COMPACTOR_ICEBERG_FUZZ_HISTORIES`` histories (default 6) of ``COMPACTOR_ICEBERG_FUZZ_STEPS``
steps (default 10); the long mode is the same test with a larger number (``COMPACTOR_ICEBERG_FUZZ_FIRST_SEED``
resumes from a seed). A failure does not stop the run: every failing seed is printed with its history and
the test fails; ``COMPACTOR_ICEBERG_FUZZ_SEED=<seed>`` replays one."""

from __future__ import annotations

import os
import shutil
import time
from collections import Counter
from pathlib import Path

import pytest

pytest.importorskip("pyiceberg", reason="pyiceberg is not installed (pip install 'compactor[iceberg]')")

from tests.fuzz.iceberg_checks import Failure, local  # noqa: E402
from tests.fuzz.iceberg_history import IcebergHistory  # noqa: E402
from tests.fuzz.iceberg_steps import settle, start, step  # noqa: E402

HISTORIES = int(os.environ.get("COMPACTOR_ICEBERG_FUZZ_HISTORIES") or 6)
STEPS = int(os.environ.get("COMPACTOR_ICEBERG_FUZZ_STEPS") or 10)


def _one(tmp: Path, seed: int, done: Counter[str]) -> str | None:
    """The history of ``seed``; None when it passed, else its failure and its history."""
    h: IcebergHistory | None = None
    try:
        h = start(tmp / f"h{seed}", seed)
        for _ in range(STEPS):
            step(h)
        settle(h)
        return None
    except Exception as e:  # noqa: BLE001 - every failure is reported with its seed, the run goes on
        log = "\n  ".join(h.log) if h is not None else "(not started)"
        return f"seed {seed} failed: {type(e).__name__}: {e}\nreplay: COMPACTOR_ICEBERG_FUZZ_SEED={seed} " \
               f"COMPACTOR_ICEBERG_FUZZ_STEPS={STEPS}\nhistory:\n  {log}"
    finally:
        if h is not None:
            done.update(h.done)
            h.forget_catalog()
        shutil.rmtree(tmp / f"h{seed}", ignore_errors=True)


def test_seeded_iceberg_histories_keep_the_oracles_rows_and_every_referenced_file(tmp_path: Path) -> None:
    first = int(os.environ.get("COMPACTOR_ICEBERG_FUZZ_FIRST_SEED") or 0)
    seeds = [int(os.environ["COMPACTOR_ICEBERG_FUZZ_SEED"])] if os.environ.get("COMPACTOR_ICEBERG_FUZZ_SEED") \
        else range(first, first + HISTORIES)
    t0 = time.monotonic()
    done: Counter[str] = Counter()
    failures = []
    for n, seed in enumerate(seeds, 1):
        failure = _one(tmp_path, seed, done)
        if failure:
            print("\n" + failure, flush=True)
            failures.append(failure)
        if len(seeds) >= 100 and n % 50 == 0:  # the long mode's progress
            print(f"{n} histories (up to seed {seed}) in {time.monotonic() - t0:.0f}s, {len(failures)} failed",
                  flush=True)
    print(f"\n{len(seeds)} histories of {STEPS} steps in {time.monotonic() - t0:.0f}s, {len(failures)} failed\n"
          f"compactor did: {dict(sorted(done.items()))}")
    assert not failures, "\n\n".join(failures[:3])
    if len(seeds) > 1:  # compactor's every kind of step ran (the weights reach them in a few histories)
        assert any(k.startswith("compact success") for k in done), done
        assert any(k.startswith("expire_snapshots success") for k in done), done


def test_the_checks_fail_on_a_missing_file_and_on_a_row_the_oracle_does_not_hold(tmp_path: Path) -> None:
    """The checks can fail: a data file a snapshot names deleted from disk is a missing reference, and a row
    appended behind the oracle's back is a row it does not hold (in the current snapshot and by time travel)."""
    h = start(tmp_path / "h", 0)
    h.append("main")
    h.check(None)
    t = h.table()
    first = sorted(h.refs.of(t) - {t.metadata_location})
    data = next(p for p in first if p.endswith(".parquet"))
    moved = local(data).with_suffix(".moved")
    local(data).rename(moved)
    with pytest.raises(Failure, match="references 1 missing file"):
        h.check(None)
    moved.rename(local(data))
    h.check(None)
    before = h.rows()
    t.append(h.frame(t, [(999, 0, 0, None)]))
    with pytest.raises(Failure, match="compactor committed a append snapshot"):
        h.record(None)  # as if compactor had committed it
    h.record(before)  # as if it were an operation that adds no row
    with pytest.raises(Failure, match=r"the current snapshot s\d+ holds .*extra \[\(999, 0, 0, None\)\]"):
        h.check(None)


def test_a_history_replays_identically(tmp_path: Path) -> None:
    """Seeds are the replay mechanism: the same seed takes the same steps (snapshots named by commit order;
    seed 2 has a retention raced by a writer's files written before the plan)."""
    logs = []
    for name in ("a", "b"):
        h = start(tmp_path / name, 2)
        for _ in range(10):
            step(h)
        h.forget_catalog()
        logs.append(h.log)
    assert logs[0] == logs[1]
