"""Spark on moto's S3 via s3a:// (hadoop-aws matching pyspark's Hadoop): a real streaming query writes a
file sink, compactor compacts it, the query restarts with every row exactly once; the spark engine
rewrites a Delta table on S3, and delta-spark's VACUUM deletes exactly its listed files there. One subprocess (its own JVM with hadoop-aws), tiny data."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import uuid
from pathlib import Path

import pytest

pytestmark = [pytest.mark.spark, pytest.mark.slow]

REPO = Path(__file__).resolve().parents[2]


def test_streaming_sink_and_spark_engine_on_s3(s3_server, tmp_path: Path) -> None:
    pytest.importorskip("pyspark.sql", reason="pyspark is part of the [spark] extra")
    if shutil.which("java") is None:
        pytest.skip("no Java on PATH")
    base = s3_server.uri(f"spark-{uuid.uuid4().hex[:8]}")
    env = {**os.environ, **s3_server.env}
    r = subprocess.run([sys.executable, "-m", "tests.objectstore.spark_s3_job", str(tmp_path), base,
                        json.dumps(s3_server.storage_options)], cwd=REPO, env=env, capture_output=True, text=True,
                       timeout=900)
    lines = [ln for ln in r.stdout.splitlines() if ln.startswith("RESULT ")]
    if r.returncode != 0 and ("hadoop-aws" in r.stderr and "unresolved dependency" in r.stderr):
        pytest.skip("hadoop-aws could not be resolved from Maven Central on this machine")
    assert r.returncode == 0 and lines, (r.stdout[-3000:], r.stderr[-5000:])
    obs = json.loads(lines[-1][len("RESULT "):])
    print(json.dumps(obs))
    # the sink: 4 batches of 20 rows, 3.compact, both partitions compacted, restart through 5.compact
    assert obs["rows_before"] == 80 and obs["unique_before"]
    assert obs["latest_compact"] == "3.compact"
    assert obs["sink_actions"] == [["sink_compact", 4], ["sink_compact", 4]]
    assert [a[0] for a in obs["sink_apply"]] == ["success", "success"], obs["sink_apply"]
    assert obs["rows_after_compaction_equal"] and obs["compact_entries_after"] == 2
    assert obs["latest_compact_after_restart"] == "5.compact"
    assert obs["rows_final"] == 120 and obs["exactly_once_final"]
    # the Delta table: rewritten by Spark jobs, committed through delta-rs (not delta-spark's S3 log store)
    assert obs["delta_actions"] == [["compact", "auto", 3], ["compact", "auto", 3]]
    assert [(a[0], a[2], a[3], a[4], a[5], a[6]) for a in obs["delta_apply"]] == \
        [("success", 3, 1, 30, 30, False)] * 2, obs["delta_apply"]
    assert obs["delta_exactly_once"] and obs["delta_files_after"] == 2
    # delta-spark's VACUUM on S3 (s3a://): exactly the 6 listed files deleted, nothing left to list
    if not obs["delta_sql"]:
        pytest.skip("the job's session could not load the Delta jars (Ivy): delta-spark's VACUUM on S3 not run")
    assert obs["vacuum_listed"] == 6
    assert obs["vacuum"] == [["success", None, 6, "delta-spark", True]], obs["vacuum"]
    assert obs["vacuum_left"] == [] and obs["vacuum_exactly_once"]
