"""The demo sink: a real streaming query whose output the example policy plans and compacts through the
real writer guard."""

from __future__ import annotations

import datetime as dt
from pathlib import Path

import pytest

from compactor.formats.file_sink.demo import DEMO_QUIET_S, build_demo_sink
from compactor.formats.file_sink.state import read_sink_state
from compactor.policy.model import Compaction, Sink, TablePolicy, Triggers
from compactor.project.model import Target
from compactor.tasks.apply import apply_plan
from compactor.tasks.plan import build_plan

pytestmark = pytest.mark.spark


def test_demo_sink_compacts_after_quiet_period(spark, tmp_path: Path) -> None:
    info = build_demo_sink(tmp_path / "clicks_sink", batches=4)
    out = Path(info.path)
    before = spark.read.parquet(str(out)).count()
    assert before == info.rows
    policy = TablePolicy(name="clicks_sink", format="spark_file_sink", path=str(out),
                         compaction=Compaction(target_file_size=32 << 20, min_file_size=8 << 20,
                                               triggers=Triggers(min_input_files=3)),
                         sink=Sink(quiet_period=DEMO_QUIET_S, checkpoint=info.checkpoint,
                                   downstream_streaming_readers="none"))
    plan = build_plan([policy], {"clicks_sink": read_sink_state(str(out))}, now=dt.datetime.now(dt.UTC),
                      target=Target(engine="spark"), project_name="demo")
    acts = plan.tables[0].actions
    assert acts and all(a.type == "sink_compact" for a in acts), plan.tables[0].skipped
    run = apply_plan(plan, target=Target(engine="spark"))
    assert run.ok, [r.error for r in run.results]
    assert spark.read.parquet(str(out)).count() == before
