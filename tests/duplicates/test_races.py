"""20 randomized races on the local engine (issue #11): a compactor apply, another tool's compaction
(delta-rs ``optimize.compact`` from a handle loaded at a random moment) and an appender, with random
delays, in threads. The pre-commit re-check refuses a stale commit, the post-commit guard reverts
compactor's own commit when it was the later one, and the watch reports the other tool's when it was:
that run fails, and the next plan lists the repair, which applied leaves every row live exactly once."""

from __future__ import annotations

import random
import threading
import time
from collections import Counter
from pathlib import Path

import pyarrow as pa
from deltalake import DeltaTable, write_deltalake

from compactor.formats.delta.duplicates.repair import detect
from compactor.models.table import TableLocation
from compactor.project.model import Target
from compactor.tasks.apply import apply_plan
from tests.apply.helpers import exactly_once, make_table, plan_for

RACES = 20
WATCH_S = 2.0


def _race(t: Path, seed: int) -> tuple[int, Counter]:
    rng = random.Random(seed)
    n = make_table(t, partitions=2, appends=3, rows=5)
    plan = plan_for(t)
    appended = [n + 5 * k for k in range(3)]
    outcome: Counter = Counter()
    errors: list[BaseException] = []

    def compactor() -> None:
        time.sleep(rng.uniform(0, 0.3))
        run = apply_plan(plan, target=Target(), watch_s=WATCH_S)
        for r in run.results:
            outcome[f"compactor:{r.status}"] += 1
            if r.details.repaired is not None:
                outcome["repaired:guard"] += 1
            if r.details.duplicated_later is not None:
                outcome["found:watch"] += 1
            elif r.status not in ("success", "stale"):
                errors.append(AssertionError(f"{r.type} {r.status}: {r.error}"))

    def other_compaction() -> None:
        time.sleep(rng.uniform(0, 0.4))
        handle = DeltaTable(str(t))
        time.sleep(rng.uniform(0, 0.6))
        try:
            handle.optimize.compact()
            outcome["other:committed"] += 1
        except Exception as e:  # noqa: BLE001 - refused by a conflict is a fine outcome too
            outcome[f"other:{type(e).__name__}"] += 1

    def appender() -> None:
        for start in appended:
            time.sleep(rng.uniform(0, 0.3))
            write_deltalake(str(t), pa.table({"date": ["2024-01-01"] * 5, "id": pa.array(range(start, start + 5),
                                                                                         pa.int64())}),
                            partition_by=["date"], mode="append")

    def guarded(f):
        def go() -> None:
            try:
                f()
            except BaseException as e:  # noqa: BLE001 - re-raised in the test thread
                errors.append(e)
        return go

    threads = [threading.Thread(target=guarded(f)) for f in (compactor, other_compaction, appender)]
    for th in threads:
        th.start()
    for th in threads:
        th.join(120)
    assert not errors, errors
    return n + 15, outcome


def test_randomized_races_leave_every_row_exactly_once(tmp_path: Path) -> None:
    t0 = time.monotonic()
    total: Counter = Counter()
    for seed in range(RACES):
        t = tmp_path / f"race{seed}"
        expected, outcome = _race(t, seed)
        if outcome["found:watch"]:  # the pipeline's next run: plan (the repair is listed), apply
            fix = plan_for(t)
            assert fix.tables[0].actions[0].type == "repair", f"race {seed}: {outcome}"
            run = apply_plan(fix, target=Target(), watch_s=0)
            assert run.ok, [(r.type, r.status, r.error) for r in run.results]
            outcome["repaired:planned"] += 1
        exactly_once(t, expected)
        assert detect(TableLocation(str(t))).open == [], f"race {seed}: {outcome}"
        total.update(outcome)
    elapsed = time.monotonic() - t0
    print(f"\n{RACES} races in {elapsed:.0f}s: {dict(sorted(total.items()))}")
    # the races are real: the other compaction landed and duplicates were made and repaired
    assert total["other:committed"] > 0
    assert total["repaired:guard"] + total["repaired:planned"] > 0, total
