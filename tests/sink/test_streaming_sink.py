"""Acceptance: a real streaming query, compaction while stopped, restart through another compaction,
every row exactly once, replaced files deleted after the grace period; guards refuse a running writer."""

from __future__ import annotations

import datetime as dt
import time
from pathlib import Path

import pytest

from compactor.formats.file_sink.log import list_log
from compactor.project.model import Target
from compactor.tasks.apply import apply_plan
from tests.sink.helpers import ROWS, add_input, run_query, sink_ids, sink_plan

pytestmark = pytest.mark.spark


@pytest.mark.parametrize("engine", ["spark", "local"])
def test_compact_restart_and_grace_deletion(spark, tmp_path: Path, engine: str) -> None:
    src, out, cp = tmp_path / "in", tmp_path / "out", tmp_path / "cp"
    for b in range(7):
        add_input(src, b)
    run_query(spark, src, out, cp)
    log = list_log(out / "_spark_metadata")
    assert log.latest_batch == 6 and log.latest_compact.path.name == "5.compact" and log.compact_interval() == 3
    before = sink_ids(spark, out)
    assert before == list(range(7 * ROWS))
    files_before = set(out.rglob("part-*.parquet"))

    plan = sink_plan(out, engine=engine)
    acts = plan.tables[0].actions
    assert [a.type for a in acts] == ["sink_compact", "sink_compact"]  # part=0 and part=1, batches 0-5 each
    assert all(a.input_files == 6 and a.expected_output_files == 1 for a in acts)
    run = apply_plan(plan, target=Target(engine=engine))
    assert run.ok, [r.error for r in run.results]
    assert all(r.rows_before == r.rows_after == 6 * ROWS // 2 for r in run.results)
    log2 = list_log(out / "_spark_metadata")
    assert [(f.batch, f.compact) for f in log2.files] == [(f.batch, f.compact) for f in log.files]  # no new ids
    assert sink_ids(spark, out) == before

    # the query restarts and writes through one more compaction (batch 8)
    for b in range(7, 10):
        add_input(src, b)
    run_query(spark, src, out, cp)
    assert list_log(out / "_spark_metadata").latest_compact.path.name == "8.compact"
    assert sink_ids(spark, out) == list(range(10 * ROWS))

    # after the grace period a later run deletes the replaced files no log file references
    time.sleep(1.1)
    later = dt.datetime.now(dt.UTC)
    plan = sink_plan(out, engine=engine, grace_period=1, now=later)
    delete = [a for a in plan.tables[0].actions if a.type == "sink_delete_replaced"]
    assert delete and delete[0].input_files == 12
    run = apply_plan(plan, target=Target(engine=engine))
    assert run.ok, [r.error for r in run.results]
    deleted = next(r for r in run.results if r.type == "sink_delete_replaced")
    assert deleted.files_removed == 12  # Spark dropped the old batch files that still listed them
    replaced = [p for p in files_before if not p.exists()]
    assert len(replaced) == 12
    assert sink_ids(spark, out) == list(range(10 * ROWS))  # reads still match
    import json

    # the same run also compacted the batches written after the restart: only those wait in the ledger
    recompacted = sum(r.files_removed for r in run.results if r.type == "sink_compact")
    ledger = json.loads((out / "_compactor" / "sink_ledger.json").read_text())
    assert recompacted == 8 and len(ledger) == 8 and all(Path(e["file"]).exists() for e in ledger)
    assert not {e["file"] for e in ledger} & {str(p) for p in replaced}


def test_guards_refuse_running_writer_and_unacknowledged_readers(spark, tmp_path: Path) -> None:
    src, out, cp = tmp_path / "in", tmp_path / "out", tmp_path / "cp"
    for b in range(4):
        add_input(src, b)
    run_query(spark, src, out, cp)
    manifest = (out / "_spark_metadata" / "2.compact").read_bytes()
    # within the quiet period (the writer may be running): planned as a skip, nothing changes
    plan = sink_plan(out, quiet_period=3600)
    assert not plan.tables[0].actions and plan.tables[0].skipped[0].reason == "writer_active"
    plan = sink_plan(out, readers="unknown")
    assert not plan.tables[0].actions and plan.tables[0].skipped[0].reason == "downstream_readers"
    # a plan made while quiet, applied when the writer has become active again: refused, nothing changed
    plan = sink_plan(out, quiet_period=0)
    assert plan.tables[0].actions
    add_input(src, 4)
    run_query(spark, src, out, cp)  # the writer ran after planning
    run = apply_plan(plan, target=Target(engine="spark"))
    assert {r.status for r in run.results} == {"stale"}
    assert (out / "_spark_metadata" / "2.compact").read_bytes() == manifest
    assert sink_ids(spark, out) == list(range(5 * ROWS))
