"""How compactor verifies delta-spark's native OPTIMIZE (``compaction.method: optimize``).

delta-spark writes and commits the files itself, so compactor checks its commit afterwards
(``outcome_from_log`` in compactor/formats/delta/apply/native.py): rows removed == rows added, each file's rows
taken from the log's ``numRecords`` and, where a file has none, from its parquet footer. Real
Spark-written tables, real OPTIMIZE commits:

- with statistics (``delta.dataSkippingNumIndexedCols=0`` drops the column statistics, but delta-spark
  still writes ``numRecords``): the rows come from the log;
- with no statistics at all (written and optimized with ``spark.databricks.delta.stats.collect=false``):
  every count comes from the footers;
- a log whose ``numRecords`` is wrong for one file (what a buggy writer leaves behind): the check fails
  and says so, the run is not ok.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from compactor.engines.spark import SparkEngine
from compactor.project.model import Target
from compactor.tasks.apply import apply_plan
from tests import spark_tables as st
from tests.apply.helpers import plan_for

pytestmark = [pytest.mark.spark, pytest.mark.delta_jars]

SPARK = Target(engine="spark")


def _rows_per_day(spark: Any, path: str) -> dict[str, int]:
    rows = spark.read.format("delta").load(path).groupBy("date").count().collect()
    return {r["date"]: r["count"] for r in rows}


def _optimize_commits(path: str, since: int) -> list[list[dict[str, Any]]]:
    commits = [st.commit_actions(path, v) for v in st.commit_versions(path) if v > since]
    assert commits and all(next(a for a in c if "commitInfo" in a)["commitInfo"]["operation"] == "OPTIMIZE"
                           for c in commits)
    return commits


def _num_records(action: dict[str, Any]) -> int | None:
    return json.loads(action["stats"]).get("numRecords") if action.get("stats") else None


def _apply_native(path: str) -> tuple[Any, Any, int]:
    plan = plan_for(Path(path), engine="spark", method="optimize")
    (tp,) = plan.tables
    assert tp.actions and not tp.skipped, tp.skipped
    version = st.commit_versions(path)[-1]
    return plan, apply_plan(plan, target=SPARK, engine=SparkEngine(SPARK)), version


def _check_rows(results: list[Any], per_day: dict[str, int]) -> None:
    assert sorted(r.partition["date"] for r in results) == sorted(per_day)
    for r in results:
        assert r.status == "success", r.error
        # per partition, the rows verified from the commit (from the plan where partitions share one
        # commit and the whole commit was verified)
        assert r.rows_before in (None, per_day[r.partition["date"]]) and r.rows_after == r.rows_before, r


def test_native_rows_from_the_optimize_commit(delta_spark, tmp_path: Path) -> None:
    t = st.no_stats(delta_spark, tmp_path / "t", appends=2, files=2)
    per_day = _rows_per_day(delta_spark, t.path)
    _, run, v0 = _apply_native(t.path)
    assert run.ok, [r.error for r in run.results]
    _check_rows(run.results, per_day)
    for commit in _optimize_commits(t.path, v0):
        # OPTIMIZE's new files carry numRecords (and no column statistics): the rows were checked from the log
        adds = [a["add"] for a in commit if "add" in a]
        assert adds and all(_num_records(a) is not None for a in adds), adds
        assert all(not json.loads(a["stats"]).get("minValues") for a in adds), adds
    assert sum(_rows_per_day(delta_spark, t.path).values()) == t.rows


def test_native_rows_from_footers_when_the_log_has_no_stats(delta_spark, tmp_path: Path) -> None:
    t = st.stats_off(delta_spark, tmp_path / "t", appends=2, files=2)
    assert all(not a.get("stats") for a in st.live_adds(t.path))
    per_day = _rows_per_day(delta_spark, t.path)
    with st.session_conf(delta_spark, {"spark.databricks.delta.stats.collect": "false"}):
        _, run, v0 = _apply_native(t.path)
    assert run.ok, [r.error for r in run.results]
    # neither the removed files (planned from a log without stats) nor OPTIMIZE's new files have a
    # numRecords: both counts can only have come from the footers, and they match the table
    for commit in _optimize_commits(t.path, v0):
        assert all(_num_records(a["add"]) is None for a in commit if "add" in a)
    _check_rows(run.results, per_day)
    assert sum(_rows_per_day(delta_spark, t.path).values()) == t.rows


def test_native_verification_catches_a_wrong_count(delta_spark, tmp_path: Path) -> None:
    t = st.date_partitioned(delta_spark, tmp_path / "t", appends=2, files=2)
    # one file's numRecords in the log claims 7 rows more than the file holds
    f = Path(t.path) / "_delta_log" / f"{1:020d}.json"
    lines = f.read_text().splitlines()
    for i, line in enumerate(lines):
        action = json.loads(line)
        if "add" in action:
            stats = json.loads(action["add"]["stats"])
            lied_day = action["add"]["partitionValues"]["date"]
            stats["numRecords"] += 7
            action["add"]["stats"] = json.dumps(stats)
            lines[i] = json.dumps(action)
            break
    f.write_text("\n".join(lines) + "\n")
    for crc in (f.with_name(f".{f.name}.crc"), f.with_name(f"{1:020d}.crc")):  # Hadoop's and Delta's checksums
        crc.unlink(missing_ok=True)
    _, run, _ = _apply_native(t.path)
    assert not run.ok
    # the table's actions run until the commit that fails verification (its partition's, or its group's);
    # then the table stops
    failed = [r for r in run.results if r.status != "success"]
    assert failed and all(r.status == "verification_failed" for r in failed), failed
    assert lied_day in {r.partition["date"] for r in failed}
    assert all("removed" in r.error and "rows" in r.error for r in failed), failed
    assert all(r.rows_before == r.rows_after for r in run.results if r.status == "success")
    # the data itself was never wrong: delta-spark still reads every row
    assert sum(_rows_per_day(delta_spark, t.path).values()) == t.rows


def test_native_spark_failure_is_a_short_error(delta_spark, tmp_path: Path) -> None:
    """A failure inside delta-spark (here: a data file the log references is gone) is reported as one
    readable error naming the statement and the Java error, not a page of Java stack frames."""
    t = st.date_partitioned(delta_spark, tmp_path / "t", appends=2, files=2)
    gone = st.live_adds(t.path)[0]
    (Path(t.path) / gone["path"]).unlink()
    _, run, _ = _apply_native(t.path)
    assert not run.ok
    # the partitions share one OPTIMIZE (a commit group): the one whose file is gone failed with it
    (failed,) = [r for r in run.results if r.partition == gone["partitionValues"]]
    assert failed.status == "error", failed
    assert failed.error.startswith("OPTIMIZE delta.`"), failed.error
    assert "\tat " not in failed.error and "Traceback" not in failed.error and len(failed.error) < 1500, failed.error
    assert gone["path"].rsplit("/", 1)[-1] in failed.error, failed.error
