"""Run by test_spark_s3.py in its own process (a SparkSession with hadoop-aws cannot share the JVM of the
test session's Spark): a real streaming query writes a file sink to moto's S3 via s3a://, compactor
compacts it, the query restarts; then the spark engine rewrites a Delta table on S3. Prints one JSON
object of observations for the test to assert on.

Usage: python -m tests.objectstore.spark_s3_job WORKDIR BASE_URI STORAGE_OPTIONS_JSON
"""

from __future__ import annotations

import datetime as dt
import json
import sys
import time
from pathlib import Path

HADOOP_AWS = "org.apache.hadoop:hadoop-aws:3.4.2"  # the Hadoop pyspark 4.1.4 ships (3.4.2)
ROWS = 20


def s3a_conf(so: dict[str, str]) -> dict[str, str]:
    return {"spark.hadoop.fs.s3a.endpoint": so["AWS_ENDPOINT_URL"],
            "spark.hadoop.fs.s3a.path.style.access": "true",
            "spark.hadoop.fs.s3a.connection.ssl.enabled": "false",
            "spark.hadoop.fs.s3a.endpoint.region": so["AWS_REGION"],
            "spark.hadoop.fs.s3a.access.key": so["AWS_ACCESS_KEY_ID"],
            "spark.hadoop.fs.s3a.secret.key": so["AWS_SECRET_ACCESS_KEY"],
            "spark.hadoop.fs.s3a.aws.credentials.provider": "org.apache.hadoop.fs.s3a.SimpleAWSCredentialsProvider"}


def add_input(src: Path, batch: int) -> None:
    src.mkdir(parents=True, exist_ok=True)
    lines = [json.dumps({"id": batch * ROWS + i, "part": i % 2}) for i in range(ROWS)]
    (src / f"in-{batch:05d}.json").write_text("\n".join(lines))


def run_query(spark, src: Path, out: str, checkpoint: str) -> None:
    spark.conf.set("spark.sql.streaming.fileSink.log.compactInterval", "2")
    q = (spark.readStream.schema("id LONG, part INT").option("maxFilesPerTrigger", 1).json(str(src))
         .writeStream.format("parquet").partitionBy("part").option("checkpointLocation", checkpoint)
         .trigger(availableNow=True).start(out))
    q.awaitTermination(300)


def main(workdir: str, base: str, so_json: str) -> None:
    sys.path.insert(0, str(Path(__file__).resolve().parents[2]))
    from compactor.formats.delta.read.state import read_delta_state
    from compactor.formats.delta.spark import build_session
    from compactor.formats.file_sink.state import read_sink_state
    from compactor.models.table import TableLocation
    from compactor.policy.model import Compaction, Sink, TablePolicy, Triggers
    from compactor.tasks.apply import apply_plan
    from compactor.tasks.plan import build_plan
    from tests.conftest import SPARK_TEST_CONF
    from tests.objectstore.helpers import ids, make_table, target

    so = json.loads(so_json)
    obs: dict = {}
    t0 = time.perf_counter()
    spark = build_session("local[2]", "compactor-s3-tests", {**SPARK_TEST_CONF, **s3a_conf(so)}, delta_jars="auto",
                          packages=[HADOOP_AWS])
    obs["session_s"] = round(time.perf_counter() - t0, 1)
    assert base.startswith("s3://")
    s3a = "s3a://" + base[len("s3://"):]
    src = Path(workdir) / "in"
    out_s3a, cp = f"{s3a}/sink", f"{s3a}/checkpoint"

    def sink_ids() -> list[int]:
        return sorted(r["id"] for r in spark.read.parquet(out_s3a).select("id").collect())

    # ---- the file sink: written by a real query via s3a://, compacted by compactor (given as s3://)
    t0 = time.perf_counter()
    for b in range(4):  # batches 0-3: 1.compact, 3.compact
        add_input(src, b)
    run_query(spark, src, out_s3a, cp)
    obs["query1_s"] = round(time.perf_counter() - t0, 1)
    before = sink_ids()
    obs["rows_before"] = len(before)
    obs["unique_before"] = before == list(range(4 * ROWS))
    policy = TablePolicy(name="sink", format="spark_file_sink", path=f"{base}/sink",
                         compaction=Compaction(target_file_size=64 << 20, min_file_size=32 << 20,
                                               triggers=Triggers(min_input_files=2)),
                         sink=Sink(quiet_period=0, checkpoint=cp, downstream_streaming_readers="none"))
    state = read_sink_state(f"{base}/sink", so, checkpoint=cp)
    obs["latest_compact"] = state.extra.latest_compact
    plan = build_plan([policy], {"sink": state}, now=dt.datetime.now(dt.UTC), target=target(so),
                      project_name="t")
    obs["sink_actions"] = [(a.type, a.input_files) for a in plan.tables[0].actions]
    run = apply_plan(plan, target=target(so))
    obs["sink_apply"] = [(r.status, r.error, r.files_removed, r.files_added) for r in run.results]
    obs["rows_after_compaction_equal"] = sink_ids() == before
    after = read_sink_state(f"{base}/sink", so)
    obs["compact_entries_after"] = after.extra.compact_entries
    t0 = time.perf_counter()
    for b in range(4, 6):
        add_input(src, b)
    run_query(spark, src, out_s3a, cp)  # the restart: through one more compaction (batch 5)
    obs["query2_s"] = round(time.perf_counter() - t0, 1)
    obs["latest_compact_after_restart"] = read_sink_state(f"{base}/sink", so).extra.latest_compact
    final = sink_ids()
    obs["rows_final"] = len(final)
    obs["exactly_once_final"] = final == list(range(6 * ROWS))

    # ---- the spark engine rewrites a Delta table on S3 (delta-rs wrote it; s3:// in the policy)
    t0 = time.perf_counter()
    uri = f"{base}/delta"
    n = make_table(uri, so, partitions=2, appends=3, rows=10)
    dpolicy = TablePolicy(name="t", path=uri, compaction=Compaction(
        target_file_size=1 << 20, min_file_size=1 << 19, triggers=Triggers(min_input_files=2), method="auto"))
    dplan = build_plan([dpolicy], {"t": read_delta_state(TableLocation(uri, so))}, now=dt.datetime.now(dt.UTC),
                       target=target(so, "spark"), project_name="t")
    obs["delta_actions"] = [(a.type, a.method, a.input_files) for a in dplan.tables[0].actions]
    drun = apply_plan(dplan, target=target(so, "spark"))
    obs["delta_apply"] = [(r.status, r.error, r.files_removed, r.files_added, r.rows_before, r.rows_after,
                           r.details.sql is not None) for r in drun.results]
    c = ids(uri, so)
    obs["delta_exactly_once"] = sorted(c) == list(range(n)) and set(c.values()) == {1}
    obs["delta_files_after"] = read_delta_state(TableLocation(uri, so)).file_count
    obs["delta_s"] = round(time.perf_counter() - t0, 1)

    # ---- delta-spark's VACUUM on S3: its dry run lists, then the delete is given exactly those files
    from deltalake import DeltaTable

    from compactor.formats.delta.read.vacuum_listing import vacuum_candidates
    from compactor.formats.delta.spark import delta_sql_enabled

    obs["delta_sql"] = delta_sql_enabled(spark)
    from tests.apply.helpers import listed_vacuum, one_action_plan

    DeltaTable(uri, storage_options=so).alter.set_table_properties(
        {"delta.deletedFileRetentionDuration": "interval 0 hours"})
    vac = listed_vacuum(uri, so)
    # a log store named: delta-spark's commits count as safe (one JVM here), so VACUUM runs natively
    spark.conf.set("spark.delta.logStore.s3a.impl", "io.delta.storage.S3SingleDriverLogStore")
    vrun = apply_plan(one_action_plan(uri, vac, so, engine="spark"), target=target(so, "spark"))
    obs["vacuum"] = [(r.status, r.error, r.files_removed, r.details.engine,
                      sorted(r.details.files or ()) == sorted(vac.files or ())) for r in vrun.results]
    obs["vacuum_listed"] = len(vac.files or ())
    obs["vacuum_left"] = vacuum_candidates(TableLocation(uri, so), 0)
    c = ids(uri, so)
    obs["vacuum_exactly_once"] = sorted(c) == list(range(n)) and set(c.values()) == {1}
    spark.stop()
    print("RESULT " + json.dumps(obs), flush=True)


if __name__ == "__main__":
    main(*sys.argv[1:4])
