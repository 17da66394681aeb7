"""The guard with a query that is really running: compaction is refused and nothing changes."""

from __future__ import annotations

import datetime as dt
import time
from pathlib import Path

import pytest

from compactor.project.model import Target
from compactor.tasks.apply import apply_plan
from tests.sink.helpers import ROWS, add_input, run_query, sink_ids, sink_plan

pytestmark = pytest.mark.spark


def test_compaction_refused_while_query_runs(spark, tmp_path: Path) -> None:
    src, out, cp = tmp_path / "in", tmp_path / "out", tmp_path / "cp"
    for b in range(4):
        add_input(src, b)
    run_query(spark, src, out, cp)
    # a plan made when the sink looked quiet (its clock an hour ahead) with a 30 s quiet period
    plan = sink_plan(out, quiet_period=30, now=dt.datetime.now(dt.UTC) + dt.timedelta(hours=1))
    assert plan.tables[0].actions
    q = (spark.readStream.schema("id LONG, part INT, v DOUBLE").option("maxFilesPerTrigger", 1).json(str(src))
         .writeStream.format("parquet").partitionBy("part").option("checkpointLocation", str(cp))
         .trigger(processingTime="200 milliseconds").start(str(out)))
    try:
        add_input(src, 4)
        deadline = time.monotonic() + 60
        while not (out / "_spark_metadata" / "4").exists() and time.monotonic() < deadline:
            time.sleep(0.2)
        assert q.isActive
        run = apply_plan(plan, target=Target(engine="spark"))
        assert not run.ok
        assert all(r.status in ("error", "stale") for r in run.results), [r.status for r in run.results]
        assert any("quiet period" in (r.error or "") or "wrote new batches" in (r.error or "") for r in run.results)
        assert not list(out.rglob("*compactor*.parquet"))
        assert all("compactor" not in p.read_text() for p in (out / "_spark_metadata").iterdir() if p.is_file() and not p.name.startswith("."))
    finally:
        q.stop()
    assert sink_ids(spark, out) == list(range(5 * ROWS))
