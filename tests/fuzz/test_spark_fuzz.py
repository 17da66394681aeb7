"""The delta-spark fuzzer (issues 36, 40): seeded random histories written by delta-spark, with deletion
vectors, column mapping, the change data feed, row tracking, clustering and v2 checkpoints, interleaved with
compactor on both engines (tests/fuzz/spark_history.py), its plans sometimes purging soft-deleted rows
(tests/fuzz/spark_compactor.py), checked after every step and at the end of each history. The default run and
longer ones also check that compactor purged, and that the local engine rewrote files with deletion vectors
and column-mapped tables.

Histories run several to a table (a table's creation and first rows are most of a short history's time):
``COMPACTOR_SPARK_FUZZ_HISTORIES`` histories (default 200) of ``COMPACTOR_SPARK_FUZZ_STEPS`` steps (default
1), ``COMPACTOR_SPARK_FUZZ_PER_TABLE`` per table (default 8). Tables are seeded 0, 1, ... (from
``COMPACTOR_SPARK_FUZZ_FIRST_SEED``); ``COMPACTOR_SPARK_FUZZ_SEED=<seed>`` replays one table's histories. A
failure does not stop the run: every failing seed is reported with its history, and the test fails.
"""

from __future__ import annotations

import os
import time
from collections import Counter
from pathlib import Path
from typing import Any

import pytest

from tests.fuzz.spark_checks import Checks, Failure, file_kind
from tests.fuzz.spark_history import SESSION_CONF, TableRun, cpu_seconds, run_table
from tests.spark_tables import session_conf

pytestmark = [pytest.mark.spark, pytest.mark.delta_jars]

HISTORIES = int(os.environ.get("COMPACTOR_SPARK_FUZZ_HISTORIES") or 200)
STEPS = int(os.environ.get("COMPACTOR_SPARK_FUZZ_STEPS") or 1)
PER_TABLE = int(os.environ.get("COMPACTOR_SPARK_FUZZ_PER_TABLE") or 8)


def _report(runs: list[TableRun], elapsed: float, cpu0: float) -> str:
    total: dict[str, Counter[str]] = {k: Counter() for k in ("did", "on", "refused", "refused_in", "spark", "s", "n",
                                                             "cpu")}
    for r in runs:
        for k, c in (("did", r.done), ("on", r.committed_on), ("refused", r.refusals), ("refused_in", r.refused_in),
                     ("spark", r.spark_refusals), ("s", r.seconds), ("n", r.counts), ("cpu", r.cpu)):
            total[k].update(c)
    refused_in, n, cpu = total["refused_in"], total["n"], total["cpu"]
    return (f"{sum(r.histories for r in runs)} histories of {STEPS} steps on {len(runs)} tables in {elapsed:.0f}s; "
            f"failed seeds: {[r.seed for r in runs if r.failure]}\n"
            f"compactor did: {dict(sorted(total['did'].items()))}\n"
            f"compactor's successful actions by engine and table feature: {dict(total['on'].most_common())}\n"
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
                print(f"\nseed {seed} failed: {run.failure}\nreplay: COMPACTOR_SPARK_FUZZ_SEED={seed} "
                      f"COMPACTOR_SPARK_FUZZ_PER_TABLE={PER_TABLE} COMPACTOR_SPARK_FUZZ_STEPS={STEPS}\nhistory:\n  "
                      + "\n  ".join(run.log), flush=True)
            if len(seeds) > 25 and len(runs) % 5 == 0:  # the long mode's progress
                print(_report(runs, time.monotonic() - t0, cpu0), flush=True)
    report = _report(runs, time.monotonic() - t0, cpu0)
    print("\n" + report)
    failures = [r for r in runs if r.failure]
    assert not failures, "\n\n".join(f"seed {r.seed}: {r.failure}\n  " + "\n  ".join(r.log) for r in failures[:3]) \
        + "\n\n" + report
    assert sum(r.histories for r in runs) == len(seeds) * PER_TABLE
    if len(seeds) >= 25:  # the default run and longer: compactor's purge and the local engine's rewrites of
        # deletion vectors and column-mapped tables are among what the histories did
        did = sum((r.done for r in runs), Counter[str]())
        on = sum((r.committed_on for r in runs), Counter[str]())
        assert did["spark purge"] and did["spark purge: files with deletion vectors rewritten"], report
        # the local engine drops deleted rows in its compactions and, now, in its purges: either rewrite counts
        assert did["local compact: files with deletion vectors rewritten"] + \
            did["local purge: files with deletion vectors rewritten"], report
        assert on["local: column mapping"], report


def test_the_checks_fail_on_a_missing_deletion_vector_and_on_a_deleted_tombstone(delta_spark, tmp_path: Path) -> None:
    """The checks can fail: a deletion vector gone is a missing reference (to the replay and to delta-spark's
    snapshot alike), and a removed file deleted outside a VACUUM is caught although nothing references it."""
    with session_conf(delta_spark, SESSION_CONF):  # RESTORE past a zero retention
        _missing_deletion_vector_and_deleted_tombstone(delta_spark, tmp_path / "t")


def _missing_deletion_vector_and_deleted_tombstone(delta_spark: Any, t: Path) -> None:
    delta_spark.sql(f"CREATE TABLE delta.`{t}` (p INT, id BIGINT, val BIGINT) USING delta "
                    "TBLPROPERTIES ('delta.enableDeletionVectors' = 'true', 'delta.deletedFileRetentionDuration' = 'interval 0 hours')")
    delta_spark.sql(f"INSERT INTO delta.`{t}` SELECT 0, id, 0 FROM range(0, 6, 1, 1)")
    delta_spark.sql(f"DELETE FROM delta.`{t}` WHERE id = 1")  # a deletion vector on the one file
    delta_spark.sql(f"INSERT INTO delta.`{t}` SELECT 0, id, 0 FROM range(6, 9, 1, 1)")
    delta_spark.sql(f"OPTIMIZE delta.`{t}`")  # both files removed, one output
    checks = Checks(delta_spark, t)
    checks.start()
    checks.step(0)
    checks.delta_spark_snapshot(0)
    # the second INSERT's file: removed by OPTIMIZE, referenced by no live file (the first one's path is,
    # with its deletion vector, in the version RESTORE goes back to)
    with_dv = {path for path, dv in checks.replay.tombstones if dv}
    (removed,) = {path for path, _ in checks.replay.tombstones} - with_dv
    (t / removed).unlink()
    with pytest.raises(Failure, match=f"deleted outside a VACUUM: \\['{removed}'\\]"):
        checks.step(0)
    checks.vacuumed()  # as if a VACUUM had deleted it
    delta_spark.sql(f"RESTORE TABLE delta.`{t}` TO VERSION AS OF 2")  # the file with the deletion vector live again
    checks.step(0)
    (dv,) = [f for f in checks.files() if file_kind(f) == "deletion vector"]
    (t / dv).unlink()
    with pytest.raises(Failure, match="deleted outside a VACUUM"):
        checks.step(0)
    checks.vacuumed()  # even a VACUUM may not take it
    with pytest.raises(Failure, match=f"references 1 missing file.*live file's deletion vector {dv}"):
        checks.step(0)
    with pytest.raises(Failure, match="delta-spark's snapshot references 1 missing file"):
        checks.delta_spark_snapshot(0)
