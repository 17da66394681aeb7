"""Verification after every rewrite: rows removed must equal rows added, from the log."""

from __future__ import annotations

import json
import time
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
from deltalake import DeltaTable, write_deltalake
from deltalake.transaction import AddAction

from compactor.apply.runner import apply_plan
from compactor.project.model import Target

from tests.apply.helpers import make_table, plan_for


def test_row_count_mismatch_stops_the_table(tmp_path: Path) -> None:
    """A file whose log stats over-count its rows (a writer bug) makes the rewrite's row counts
    disagree: the action is reported verification_failed and the table's later actions do not run."""
    t = tmp_path / "t"
    make_table(t, partitions=2, appends=5)
    dt_ = DeltaTable(str(t))
    rel = "date=2024-01-01/part-lying-stats.parquet"
    pq.write_table(pa.table({"id": pa.array(range(10_000, 10_010), pa.int64())}), t / rel)
    dt_.create_write_transaction(
        [AddAction(rel, (t / rel).stat().st_size, {"date": "2024-01-01"}, int(time.time() * 1000), True,
                   json.dumps({"numRecords": 11}))],
        mode="append", schema=dt_.schema(), partition_by=["date"])
    run = apply_plan(plan_for(t), target=Target())
    statuses = [(r.partition["date"], r.status) for r in run.results]
    assert statuses == [("2024-01-01", "verification_failed")]  # 2024-01-02 was not attempted
    (r,) = run.results
    assert r.rows_before == 5 * 50 + 11 and r.rows_after == 5 * 50 + 10
    assert not run.ok


def test_rows_unchanged_passes_verification(tmp_path: Path) -> None:
    t = tmp_path / "t"
    make_table(t, partitions=1, appends=5)
    write_deltalake(str(t), pa.table({"date": ["2024-01-01"], "id": pa.array([10**6], pa.int64())}),
                    partition_by=["date"], mode="append")
    (r,) = apply_plan(plan_for(t), target=Target()).results
    assert r.status == "success" and r.rows_before == r.rows_after == 251
