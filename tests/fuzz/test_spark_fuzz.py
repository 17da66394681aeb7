"""The delta-spark fuzzer (issue 36): seeded random histories written by delta-spark, with deletion vectors,
column mapping, the change data feed, row tracking, clustering and v2 checkpoints, interleaved with compactor
on both engines (tests/fuzz/spark_history.py), checked after every step and at the end of each history.

Histories run several to a table (a table's creation and first rows are most of a short history's time):
``COMPACTOR_SPARK_FUZZ_HISTORIES`` histories (default 200) of ``COMPACTOR_SPARK_FUZZ_STEPS`` steps (default
2), ``COMPACTOR_SPARK_FUZZ_PER_TABLE`` per table (default 8). Tables are seeded 0, 1, ... (from
``COMPACTOR_SPARK_FUZZ_FIRST_SEED``); ``COMPACTOR_SPARK_FUZZ_SEED=<seed>`` replays one table's histories. A
failure does not stop the run: every failing seed is reported with its history, and the test fails.
"""

from __future__ import annotations

import os
import time
from collections import Counter
from pathlib import Path

import pytest

from tests.fuzz.spark_history import SESSION_CONF, TableRun, cpu_seconds, run_table
from tests.spark_tables import session_conf

pytestmark = [pytest.mark.spark, pytest.mark.delta_jars]

HISTORIES = int(os.environ.get("COMPACTOR_SPARK_FUZZ_HISTORIES") or 200)
STEPS = int(os.environ.get("COMPACTOR_SPARK_FUZZ_STEPS") or 2)
PER_TABLE = int(os.environ.get("COMPACTOR_SPARK_FUZZ_PER_TABLE") or 8)


def _report(runs: list[TableRun], elapsed: float, cpu0: float) -> str:
    total: dict[str, Counter[str]] = {k: Counter() for k in ("did", "refused", "refused_in", "spark", "s", "n", "cpu")}
    for r in runs:
        for k, c in (("did", r.done), ("refused", r.refusals), ("refused_in", r.refused_in), ("spark", r.spark_refusals),
                     ("s", r.seconds), ("n", r.counts), ("cpu", r.cpu)):
            total[k].update(c)
    refused_in, n, cpu = total["refused_in"], total["n"], total["cpu"]
    return (f"{sum(r.histories for r in runs)} histories of {STEPS} steps on {len(runs)} tables in {elapsed:.0f}s; "
            f"failed seeds: {[r.seed for r in runs if r.failure]}\n"
            f"compactor did: {dict(sorted(total['did'].items()))}\n"
            f"compactor's refusals (times, histories): "
            f"{', '.join(f'{k}: {v}, {refused_in[k]}' for k, v in total['refused'].most_common())}\n"
            f"delta-spark's refusals: {dict(total['spark'].most_common())}\n"
            f"seconds (CPU seconds, count) per kind of step: "
            f"{', '.join(f'{k} {v:.0f} ({cpu[k]:.0f}, {n[k]})' for k, v in total['s'].most_common())}\n"
            f"CPU seconds of this process and its JVM: {cpu_seconds() - cpu0:.0f}")



def test_delta_spark_histories_keep_every_row_and_every_referenced_file(delta_spark, tmp_path: Path) -> None:
    first = int(os.environ.get("COMPACTOR_SPARK_FUZZ_FIRST_SEED") or 0)
    tables = -(-HISTORIES // PER_TABLE)
    seeds = [int(os.environ["COMPACTOR_SPARK_FUZZ_SEED"])] if os.environ.get("COMPACTOR_SPARK_FUZZ_SEED") \
        else range(first, first + tables)
    t0, cpu0 = time.monotonic(), cpu_seconds()
    runs: list[TableRun] = []
    with session_conf(delta_spark, SESSION_CONF):
        for seed in seeds:
            run = run_table(delta_spark, tmp_path, seed, PER_TABLE, STEPS)
            runs.append(run)
            if os.environ.get("COMPACTOR_SPARK_FUZZ_VERBOSE"):
                print(f"\nseed {seed}:\n  " + "\n  ".join(run.log), flush=True)
            if run.failure:
                print(f"\nseed {seed} failed: {run.failure}\nhistory:\n  " + "\n  ".join(run.log), flush=True)
            if len(seeds) >= 100 and len(runs) % 50 == 0:  # the long mode's progress
                print(_report(runs, time.monotonic() - t0, cpu0), flush=True)
    report = _report(runs, time.monotonic() - t0, cpu0)
    print("\n" + report)
    failures = [r for r in runs if r.failure]
    assert not failures, "\n\n".join(f"seed {r.seed}: {r.failure}\n  " + "\n  ".join(r.log) for r in failures[:3]) \
        + "\n\n" + report
    assert sum(r.histories for r in runs) == len(seeds) * PER_TABLE
