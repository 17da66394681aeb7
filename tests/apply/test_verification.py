"""Verification of every rewrite: rows removed == rows added, from the parquet footers, before committing."""

from __future__ import annotations

import json
import time
from dataclasses import replace
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
from deltalake import DeltaTable, write_deltalake
from deltalake.transaction import AddAction

from compactor.engines.local import LocalEngine
from compactor.project.model import Target
from compactor.tasks.apply import apply_plan
from tests.apply.helpers import exactly_once, make_table, on_disk_unreferenced, plan_for


def test_lying_log_statistics_do_not_matter_rows_come_from_footers(tmp_path: Path) -> None:
    """A file whose log stats over-count its rows (a writer bug): the footers are the truth, the rewrite
    keeps every row and succeeds (log statistics used to fail it after committing)."""
    t = tmp_path / "t"
    n = make_table(t, partitions=2, appends=5)
    dt_ = DeltaTable(str(t))
    rel = "date=2024-01-01/part-lying-stats.parquet"
    pq.write_table(pa.table({"id": pa.array(range(n, n + 10), pa.int64())}), t / rel)
    dt_.create_write_transaction(
        [AddAction(rel, (t / rel).stat().st_size, {"date": "2024-01-01"}, int(time.time() * 1000), True,
                   json.dumps({"numRecords": 11}))],
        mode="append", schema=dt_.schema(), partition_by=["date"])
    run = apply_plan(plan_for(t), target=Target())
    assert run.ok, [r.error for r in run.results]
    r = next(r for r in run.results if r.partition["date"] == "2024-01-01")
    assert r.rows_before == r.rows_after == 5 * 50 + 10
    exactly_once(t, n + 10)


class _DroppingEngine(LocalEngine):
    """Writes one row too few into the first output: a rewrite bug the footers must catch."""

    def rewrite(self, jobs, schema, on_done=None):
        files = super().rewrite(jobs, schema, on_done)
        first = files[0]
        table = pq.read_table(first.location)
        pq.write_table(table.slice(1), first.location)
        return [replace(first, rows=table.num_rows - 1)] + files[1:]


def test_an_output_with_a_wrong_row_count_is_caught_before_commit(tmp_path: Path) -> None:
    t = tmp_path / "t"
    n = make_table(t, partitions=2, appends=5)
    version = DeltaTable(str(t)).version()
    run = apply_plan(plan_for(t), target=Target(), engine=_DroppingEngine())
    statuses = [(r.partition["date"], r.status) for r in run.results]
    # both partitions were one commit group: the good one is not committed either
    assert statuses == [("2024-01-01", "verification_failed"), ("2024-01-02", "error")]
    assert "nothing was committed" in run.results[0].error and not run.ok
    assert "2024-01-01" in run.results[1].error and "not committed" in run.results[1].error
    assert DeltaTable(str(t)).version() == version
    assert on_disk_unreferenced(t) == set()  # the bad output was deleted
    exactly_once(t, n)


def test_with_one_partition_per_commit_the_table_stops_at_the_first_failed_verification(tmp_path: Path) -> None:
    t = tmp_path / "t"
    n = make_table(t, partitions=2, appends=5)
    version = DeltaTable(str(t)).version()
    run = apply_plan(plan_for(t), target=Target(commit_every_bins=1), engine=_DroppingEngine())
    statuses = [(r.partition["date"], r.status) for r in run.results]
    assert statuses == [("2024-01-01", "verification_failed")]  # 2024-01-02 was not attempted
    assert DeltaTable(str(t)).version() == version
    assert on_disk_unreferenced(t) == set()
    exactly_once(t, n)
    exactly_once(t, n)


def test_rows_unchanged_passes_verification(tmp_path: Path) -> None:
    t = tmp_path / "t"
    make_table(t, partitions=1, appends=5)
    write_deltalake(str(t), pa.table({"date": ["2024-01-01"], "id": pa.array([10**6], pa.int64())}),
                    partition_by=["date"], mode="append")
    (r,) = apply_plan(plan_for(t), target=Target()).results
    assert r.status == "success" and r.rows_before == r.rows_after == 251
