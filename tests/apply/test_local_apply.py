"""End-to-end apply on the local (delta-rs) engine: counts, rows, dataChange=false, stats, idempotence."""

from __future__ import annotations

import json
import threading
from pathlib import Path

import jsonschema
import pyarrow as pa
from deltalake import DeltaTable, write_deltalake

from compactor.policy.schema import load_schema
from compactor.project.model import Project, Target
from compactor.tasks.apply import apply_plan
from tests.apply.helpers import exactly_once, ids, make_table, plan_for


def test_apply_compacts_to_predicted_counts_and_keeps_rows(tmp_path: Path) -> None:
    t = tmp_path / "t"
    n = make_table(t)
    before = DeltaTable(str(t)).version()
    plan = plan_for(t)
    predicted = {a.partition["date"]: a.expected_output_files for a in plan.tables[0].actions}
    assert len(predicted) == 3
    run = apply_plan(plan, target=Target(), project=Project(name="p", root=tmp_path))
    assert run.ok and run.totals.succeeded == 3
    exactly_once(t, n)
    for r in run.results:
        assert r.rows_before == r.rows_after == 8 * 50
        assert r.files_removed == 8 and r.files_added == predicted[r.partition["date"]]
    # every compaction commit is dataChange=false, carries stats and compactor's commit metadata
    for v in range(before + 1, DeltaTable(str(t)).version() + 1):
        lines = [json.loads(x) for x in (t / "_delta_log" / f"{v:020d}.json").read_text().splitlines()]
        adds = [x["add"] for x in lines if "add" in x]
        removes = [x["remove"] for x in lines if "remove" in x]
        info = next(x["commitInfo"] for x in lines if "commitInfo" in x)
        assert adds and removes
        assert all(a["dataChange"] is False for a in adds) and all(r["dataChange"] is False for r in removes)
        assert all(json.loads(a["stats"])["numRecords"] > 0 for a in adds)
        assert "compactor.run_id" in json.dumps(info)
    # run_results.json is written and valid
    data = json.loads((tmp_path / "target" / "run_results.json").read_text())
    jsonschema.validate(data, load_schema("run_results.schema.json"))
    # idempotence: plan again -> no compaction actions
    assert not [a for a in plan_for(t).tables[0].actions if a.type == "compact"]


def test_stale_plan_is_skipped_and_appends_are_fine(tmp_path: Path) -> None:
    t = tmp_path / "t"
    n = make_table(t)
    plan = plan_for(t)
    # someone else compacts one partition after planning; another partition only gets appends
    DeltaTable(str(t)).optimize.compact(partition_filters=[("date", "=", "2024-01-01")])
    write_deltalake(str(t), pa.table({"date": ["2024-01-02"] * 5, "id": pa.array(range(n, n + 5), pa.int64())}),
                    partition_by=["date"], mode="append")
    run = apply_plan(plan, target=Target())
    status = {r.partition["date"]: r.status for r in run.results}
    assert status == {"2024-01-01": "stale", "2024-01-02": "success", "2024-01-03": "success"}
    assert run.ok  # stale is not a failure
    exactly_once(t, n + 5)


def test_replan_stale_replans_the_partition(tmp_path: Path) -> None:
    t = tmp_path / "t"
    n = make_table(t)
    plan = plan_for(t)
    # a concurrent DELETE rewrites one planned file of 2024-01-01 (removes it, adds its other rows back)
    DeltaTable(str(t)).delete("id = 0")
    run = apply_plan(plan, target=Target(), replan_stale=True)
    r = next(r for r in run.results if r.partition["date"] == "2024-01-01")
    assert r.status == "success" and r.details.replanned is True
    assert r.files_removed == 8 and r.rows_before == r.rows_after == 8 * 50 - 1
    c = ids(t)
    assert 0 not in c and sorted(c) == list(range(1, n)) and max(c.values()) == 1


def test_concurrent_appender_loses_nothing(tmp_path: Path) -> None:
    t = tmp_path / "t"
    n = make_table(t, partitions=4, appends=10)
    plan = plan_for(t)
    appended: list[int] = []
    stop = threading.Event()

    def appender() -> None:
        k = n
        while not stop.is_set() and k < n + 40 * 10:
            write_deltalake(str(t), pa.table({"date": ["2024-01-01"] * 10, "id": pa.array(range(k, k + 10), pa.int64())}),
                            partition_by=["date"], mode="append")
            appended.append(k)
            k += 10

    th = threading.Thread(target=appender)
    th.start()
    try:
        run = apply_plan(plan, target=Target())
    finally:
        stop.set()
        th.join()
    assert run.ok
    exactly_once(t, n + 10 * len(appended))


def test_dry_run_changes_nothing(tmp_path: Path) -> None:
    t = tmp_path / "t"
    n = make_table(t)
    v = DeltaTable(str(t)).version()
    run = apply_plan(plan_for(t), target=Target(), dry_run=True)
    assert run.dry_run and all(r.status == "skipped" for r in run.results)
    assert DeltaTable(str(t)).version() == v
    assert sum(ids(t).values()) == n
