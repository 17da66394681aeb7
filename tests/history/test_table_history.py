"""What a Delta table's own history says about compactor's commits (issue 37 item 6), read back with
delta-spark's `DESCRIBE HISTORY`: a compaction is an OPTIMIZE with delta-spark's operationParameters
(predicate, zOrderBy, clusterBy, auto) and operationMetrics, a VACUUM compactor runs itself a VACUUM START
and a VACUUM END, a repair of rows live twice a COMPACTOR REPAIR; each carries compactor's run id in
``userMetadata``. The commits are made by the CLI (local engine, no JVM); only the reading is Spark's, in the
shared session."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from deltalake import DeltaTable

from compactor.project.model import Target
from compactor.tasks.apply import apply_plan
from tests.apply.helpers import exactly_once, listed_vacuum, make_table, one_action_plan
from tests.cli.test_cli import cli, project

pytestmark = [pytest.mark.spark, pytest.mark.delta_jars]

POLICY = ("version: 1\ntables:\n  - name: t\n    path: {path}\n"
          "    compaction: {{target_file_size: 1MiB, triggers: {{min_input_files: 2}}}}\n")


def _history(spark: Any, t: Path) -> list[dict[str, Any]]:
    rows = spark.sql(f"DESCRIBE HISTORY delta.`{t}`").orderBy("version").collect()
    return [r.asDict() for r in rows]


def _rows(spark: Any, t: Path) -> int:
    return spark.read.format("delta").load(str(t)).count()


def test_a_compaction_and_a_vacuum_are_an_optimize_and_vacuum_start_end_in_describe_history(
        tmp_path: Path, delta_spark) -> None:
    t = tmp_path / "t"
    n = make_table(t, partitions=2, appends=3, rows=5)
    proj = project(tmp_path / "proj", POLICY.format(path=t))
    assert cli("plan", "--project-dir", str(proj)).returncode == 0
    r = cli("apply", str(proj / "target" / "plan.json"), "--project-dir", str(proj))
    assert r.returncode == 0, r.stdout + r.stderr
    run = json.loads((proj / "target" / "run_results.json").read_text())
    (optimize,) = [h for h in _history(delta_spark, t) if h["operation"] not in ("CREATE TABLE", "WRITE")]
    assert optimize["operation"] == "OPTIMIZE", optimize
    assert optimize["operationParameters"] == {
        "predicate": "[\"(date = '2024-01-01')\", \"(date = '2024-01-02')\"]", "zOrderBy": "[]", "clusterBy": "[]",
        "auto": "false"}, optimize["operationParameters"]
    metrics = optimize["operationMetrics"]
    assert (metrics["numRemovedFiles"], metrics["numAddedFiles"]) == ("6", "2"), metrics
    assert int(metrics["numRemovedBytes"]) == sum(x["bytes_removed"] for x in run["results"])
    assert int(metrics["numAddedBytes"]) == sum(x["bytes_added"] for x in run["results"])
    assert json.loads(optimize["userMetadata"])["compactor.run_id"] == run["run_id"]
    assert optimize["isBlindAppend"] is False and optimize["readVersion"] == optimize["version"] - 1
    assert _rows(delta_spark, t) == n
    exactly_once(t, n)

    # a VACUUM compactor deletes itself (no delta-spark in its engine): START and END, as delta-spark writes
    DeltaTable(str(t)).alter.set_table_properties({"delta.deletedFileRetentionDuration": "interval 0 hours"})
    vacuum = apply_plan(one_action_plan(str(t), listed_vacuum(str(t))), target=Target())
    assert vacuum.ok and vacuum.results[0].details.file_count == 6, vacuum.results
    start, end = _history(delta_spark, t)[-2:]
    assert (start["operation"], end["operation"]) == ("VACUUM START", "VACUUM END")
    assert start["operationMetrics"] == {"numFilesToDelete": "6"} and start["operationParameters"][
        "specifiedRetentionMillis"] == "0", start
    assert end["operationMetrics"] == {"numDeletedFiles": "6", "numVacuumedDirectories": "2"}, end
    assert end["operationParameters"] == {"status": "COMPLETED"}
    assert json.loads(end["userMetadata"])["compactor.run_id"] == vacuum.run_id
    assert _rows(delta_spark, t) == n


def test_a_repair_is_a_compactor_repair_in_describe_history(tmp_path: Path, delta_spark) -> None:
    from tests.apply.test_concurrency import _rewrite_two_files

    t = tmp_path / "t"
    n = make_table(t, partitions=1, appends=6, rows=10)
    later = DeltaTable(str(t))
    _rewrite_two_files(t)
    later.optimize.compact()  # read before the other rewrite, committed after it: 20 rows live twice
    assert _rows(delta_spark, t) == n + 20
    proj = project(tmp_path / "proj", POLICY.format(path=t))
    r = cli("repair", "--project-dir", str(proj), "--auto-approve")
    assert r.returncode == 0, r.stdout + r.stderr
    repair = _history(delta_spark, t)[-1]
    assert repair["operation"] == "COMPACTOR REPAIR", repair
    assert repair["operationParameters"] == {"duplicatedBy": f"[{DeltaTable(str(t)).version() - 1}]"}
    metrics = repair["operationMetrics"]
    assert metrics["numDeduplicatedRows"] == "20" and metrics["numRemovedFiles"] == "1", metrics
    assert "compactor.run_id" in json.loads(repair["userMetadata"])
    assert _rows(delta_spark, t) == n
