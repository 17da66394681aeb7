"""Readers on logs written by a real streaming query whose paths need URL-encoding (spaces, `%` in the
input folder and in partition values), and a compaction of that sink read back by Spark."""

from __future__ import annotations

import datetime as dt
import json
from pathlib import Path

import pytest

from compactor.formats.file_sink.log import entry_local_path, list_log, source_entries_table
from compactor.formats.file_sink.state import read_sink_state
from compactor.policy.model import Compaction, Sink, TablePolicy, Triggers
from compactor.project.model import Target
from compactor.tasks.apply import apply_plan
from compactor.tasks.inspect import inspect_path
from compactor.tasks.plan import build_plan

pytestmark = pytest.mark.spark

KINDS = ["a b", "c%d"]


def test_encoded_paths_read_and_compact(spark, tmp_path: Path) -> None:
    src, out, cp = tmp_path / "in put %x", tmp_path / "out", tmp_path / "cp"
    src.mkdir()
    for b in range(5):
        rows = [{"id": b * 10 + i, "kind": KINDS[i % 2]} for i in range(10)]
        (src / f"f {b}.json").write_text("\n".join(json.dumps(r) for r in rows))
    spark.conf.set("spark.sql.streaming.fileSink.log.compactInterval", "2")
    q = (spark.readStream.schema("id LONG, kind STRING").option("maxFilesPerTrigger", 1).json(str(src))
         .writeStream.format("parquet").partitionBy("kind").option("checkpointLocation", str(cp))
         .trigger(availableNow=True).start(str(out)))
    q.awaitTermination(120)
    q.stop()

    log = list_log(out / "_spark_metadata")
    assert (log.latest_batch, log.latest_compact.path.name, log.compact_interval()) == (4, "3.compact", 2)
    state = read_sink_state(str(out))
    raw = state.files.column("path").to_pylist()
    assert any("%20" in p or "%25" in p for p in raw)  # kept exactly as Spark wrote them
    on_disk = {p.resolve() for p in out.rglob("part-*.parquet")}
    assert {entry_local_path(p, out).resolve() for p in raw} == on_disk
    assert sorted(state.files.column("partition.kind").unique().to_pylist()) == KINDS

    sources = source_entries_table(list_log(cp / "sources" / "0"))
    assert sorted(entry_local_path(p, src).name for p in sources.column("path").to_pylist()) == \
        [f"f {b}.json" for b in range(5)]
    report = inspect_path(str(cp))
    assert report.kind == "checkpoint" and report.logs[0].entries == 5

    before = sorted(r["id"] for r in spark.read.parquet(str(out)).collect())
    policy = TablePolicy(name="s", format="spark_file_sink", path=str(out),
                         compaction=Compaction(target_file_size=64 << 20, min_file_size=32 << 20,
                                               triggers=Triggers(min_input_files=2)),
                         sink=Sink(quiet_period=0, downstream_streaming_readers="none"))
    plan = build_plan([policy], {"s": state}, now=dt.datetime.now(dt.UTC), target=Target(engine="local"),
                      project_name="t")
    assert len(plan.tables[0].actions) == 2  # one bin per partition, both encoded
    run = apply_plan(plan, target=Target(engine="local"))
    assert run.ok, [r.error for r in run.results]
    assert sorted(r["id"] for r in spark.read.parquet(str(out)).collect()) == before == list(range(50))
    kinds = {r["kind"] for r in spark.read.parquet(str(out)).select("kind").distinct().collect()}
    assert kinds == set(KINDS)
