"""The spark engine through a real Spark Connect server (profile ``spark.remote``), started once for the
module with pyspark's own launcher (tests/spark_connect.py). No JVM runs in the client: compactor's CLI
compacts Delta tables that Spark wrote through the server, rows checked exactly with delta-spark over the
same server; a second apply runs with no Java anywhere on its PATH; a commit group's bins are one Spark
job on the server; an unreachable URL stops apply with one error line."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from deltalake import DeltaTable

from compactor.engines.spark import SparkEngine
from compactor.project.model import SparkSettings, Target
from compactor.tasks.apply import apply_plan
from tests.apply.helpers import exactly_once, make_table, plan_for
from tests.spark_connect import ConnectServer, ServerUnavailable, free_port, start_connect_server

pytestmark = pytest.mark.spark
REPO = Path(__file__).resolve().parents[2]
ROWS = 240
#: each table's policy method (auto on a plain table: compactor's rewrite; optimize: delta-spark's OPTIMIZE)
METHODS = {"rw": "rewrite", "au": "auto", "opt": "optimize"}


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ConnectServer]:
    pytest.importorskip("grpc", reason="pyspark[connect] (grpcio and friends) is part of the [spark] extra")
    pytest.importorskip("delta", reason="delta-spark is part of the [spark] extra")
    try:
        s = start_connect_server(tmp_path_factory.mktemp("connect-server"))
    except ServerUnavailable as e:
        pytest.skip(f"no Spark Connect server with Delta Lake on this machine: {e}")
    yield s
    s.stop()


@pytest.fixture(scope="module")
def remote(server: ConnectServer) -> Iterator[Any]:
    """The test's own Spark Connect session (writes the tables, reads rows with delta-spark)."""
    from pyspark.sql.connect.session import SparkSession

    session = SparkSession.builder.remote(server.url).create()
    yield session
    session.stop()


def _append(spark: Any, path: Path, start: int, appends: int) -> int:
    """``appends`` Spark writes of ROWS rows over 4 tasks into 3 partitions: up to 4 small files per partition
    each. Returns the next id."""
    for _ in range(appends):
        (spark.range(start, start + ROWS)
         .selectExpr("id", "concat('p', CAST(id % 3 AS STRING)) AS p", "CAST(id AS DOUBLE) * 1.5 AS amount",
                     "CAST(id * 7 AS STRING) AS s")
         .repartition(4).write.format("delta").partitionBy("p").mode("append").save(str(path)))
        start += ROWS
    return start


def _rows(spark: Any, path: Path) -> list[tuple[Any, ...]]:
    return sorted(tuple(r) for r in spark.read.format("delta").load(str(path)).collect())


def _files_per_partition(path: Path, column: str = "p") -> dict[str, int]:
    counts: dict[str, int] = {}
    for pv in DeltaTable(str(path)).get_add_actions(flatten=True).column(f"partition.{column}").to_pylist():
        counts[pv] = counts.get(pv, 0) + 1
    return counts


def _commit_infos(path: Path, after: int) -> list[dict[str, Any]]:
    out = []
    for f in sorted((path / "_delta_log").glob("*.json")):
        if int(f.name[:20]) > after:
            lines = [json.loads(x) for x in f.read_text().splitlines() if x.strip()]
            out.append(next(x["commitInfo"] for x in lines if "commitInfo" in x))
    return out


def _project(root: Path, tables: Path) -> Path:
    (root / "policies").mkdir(parents=True)
    (root / "compactor.yml").write_text("name: connect\n")
    (root / "profiles.yml").write_text(  # the URL through env_var, as a deployment would give it
        "default:\n  outputs:\n    dev:\n      engine: spark\n      spark:\n"
        "        remote: \"{{ env_var('COMPACTOR_TEST_SPARK_REMOTE') }}\"\n"
        "        conf: {spark.sql.session.timeZone: UTC, spark.driver.memory: 1g}\n")
    (root / "policies" / "t.yml").write_text("version: 1\ntables:\n" + "".join(
        f"  - name: {name}\n    path: {tables / name}\n    compaction: {{target_file_size: 1MiB, method: {method}, "
        "triggers: {min_input_files: 2}}\n" for name, method in METHODS.items()))
    return root


def _cli(project: Path, *args: str, env: dict[str, str]) -> tuple[subprocess.CompletedProcess[str], float]:
    t0 = time.perf_counter()
    r = subprocess.run([sys.executable, "-m", "compactor", *args, "--project-dir", str(project)], capture_output=True,
                       text=True, env=env, timeout=300)
    return r, time.perf_counter() - t0


def _env(url: str, **extra: str) -> dict[str, str]:
    return {**os.environ, "PYTHONPATH": str(REPO), "COLUMNS": "200", "COMPACTOR_TEST_SPARK_REMOTE": url, **extra}


def _no_java_env(url: str, bin_dir: Path) -> dict[str, str]:
    """PATH holds only a `java` that records being started and fails; no JAVA_HOME: a client JVM cannot start."""
    bin_dir.mkdir()
    java = bin_dir / "java"
    java.write_text(f"#!/bin/sh\necho \"$@\" >> {bin_dir / 'java-was-started'}\nexit 1\n")
    java.chmod(0o755)
    env = {k: v for k, v in _env(url).items() if k not in ("JAVA_HOME", "SPARK_HOME")}
    return {**env, "PATH": str(bin_dir)}


def _plan_and_apply(project: Path, env: dict[str, str]) -> tuple[dict[str, Any], dict[str, Any], float]:
    plan, _ = _cli(project, "plan", env=env)
    assert plan.returncode == 0, plan.stdout[-2000:] + plan.stderr[-2000:]
    doc = json.loads((project / "target" / "plan.json").read_text())
    applied, seconds = _cli(project, "apply", str(project / "target" / "plan.json"), env=env)
    assert applied.returncode == 0, applied.stdout[-3000:] + applied.stderr[-3000:]
    assert "Traceback" not in applied.stderr
    return doc, json.loads((project / "target" / "run_results.json").read_text()), seconds


def _check_compacted(remote: Any, tables: Path, plan: dict[str, Any], run: dict[str, Any],
                     rows: dict[str, list[tuple[Any, ...]]], versions: dict[str, int]) -> None:
    assert run["totals"]["errors"] == 0 and run["totals"]["verification_failed"] == 0, run["results"]
    assert run["target"]["spark"]["remote"].startswith("sc://127.0.0.1:")
    for table in plan["tables"]:
        name, path = table["name"], tables / table["name"]
        assert table["actions"], name
        assert _rows(remote, path) == rows[name], name  # every row exactly once, every value as it was
        planned = {a["partition"]["p"]: a["expected_output_files"] for a in table["actions"]}
        live = _files_per_partition(path)
        assert {p: live[p] for p in planned} == planned, name
        methods = {r["details"].get("method") for r in run["results"] if r["table"] == name}
        assert methods == {"native OPTIMIZE" if METHODS[name] == "optimize" else "rewrite"}, (name, methods)
        infos = _commit_infos(path, versions[name])
        assert infos, name
        for info in infos:  # compactor's commits: its own with its run id, delta-spark's OPTIMIZE with its metadata
            marked = info.get("compactor.run_id") or json.loads(info.get("userMetadata") or "{}").get("compactor.run_id")
            assert marked == run["run_id"], (name, info)
            assert info.get("operation") == "OPTIMIZE", (name, info)  # both recorded as delta-spark records it
            assert str(info.get("engineInfo")).startswith("compactor/") == (METHODS[name] != "optimize"), (name, info)


def test_apply_through_spark_connect_compacts_exactly_and_a_second_apply_starts_no_jvm(
        server: ConnectServer, remote: Any, tmp_path: Path) -> None:
    tables = tmp_path / "tables"
    for name in METHODS:
        _append(remote, tables / name, 0, appends=3)
    project = _project(tmp_path / "project", tables)

    def snapshot() -> tuple[dict[str, list[tuple[Any, ...]]], dict[str, int]]:
        return ({n: _rows(remote, tables / n) for n in METHODS},
                {n: DeltaTable(str(tables / n)).version() for n in METHODS})

    rows, versions = snapshot()
    assert all(len(r) == 3 * ROWS for r in rows.values())
    assert all(n >= 9 for t in METHODS for n in _files_per_partition(tables / t).values())  # small files
    plan, run, first_s = _plan_and_apply(project, _env(server.url))
    _check_compacted(remote, tables, plan, run, rows, versions)

    # more small files, then a second apply in a process that cannot start Java at all
    for name in METHODS:
        _append(remote, tables / name, 3 * ROWS, appends=2)
    rows, versions = snapshot()
    bin_dir = tmp_path / "bin"
    plan, run, second_s = _plan_and_apply(project, _no_java_env(server.url, bin_dir))
    _check_compacted(remote, tables, plan, run, rows, versions)
    assert not (bin_dir / "java-was-started").exists(), (bin_dir / "java-was-started").read_text()
    print(f"\nSpark Connect: server up in {server.started_s:.1f} s; apply (whole process, 3 tables): "
          f"first {first_s:.1f} s, second (no Java on PATH) {second_s:.1f} s")
    # the client starts no JVM: the whole second apply takes less than the server's own JVM start
    assert second_s < server.started_s, (second_s, server.started_s)


def test_a_commit_group_is_one_spark_job_on_the_server(server: ConnectServer, remote: Any, tmp_path: Path) -> None:
    t = tmp_path / "t"
    n = make_table(t, partitions=4, appends=3)
    target = Target(engine="spark", spark=SparkSettings(remote=server.url))
    plan = plan_for(t, engine="spark", method="rewrite")
    assert [len(a.bins) for a in plan.tables[0].actions] == [1, 1, 1, 1]
    rows = _rows(remote, t)
    engine = SparkEngine(target)
    jobs = server.job_ids()
    try:
        run = apply_plan(plan, target=target, engine=engine, watch_s=0)
        assert engine.connected
    finally:
        engine.close()  # this client's session; the server runs on
    assert run.ok, [r.error for r in run.results]
    assert {r.details.commit_group for r in run.results} == {4}
    assert len(server.job_ids() - jobs) == 1  # the 4 bins: one union write
    assert _files_per_partition(t, "date") == {f"2024-01-0{i}": 1 for i in range(1, 5)}
    exactly_once(t, n)
    assert _rows(remote, t) == rows  # the server still serves the test's own session
    assert not list(t.rglob("_compactor_staging_*")) and not list(t.rglob("__compactor_bin*"))


@pytest.mark.parametrize("given_by", ["profile", "SPARK_REMOTE"])
def test_an_unreachable_server_stops_apply_with_one_error_line(tmp_path: Path, given_by: str) -> None:
    """The URL from the profile's spark.remote, or from pyspark's SPARK_REMOTE when the profile names none."""
    pytest.importorskip("grpc", reason="pyspark[connect] (grpcio and friends) is part of the [spark] extra")
    t = tmp_path / "t"
    make_table(t, partitions=2, appends=3)
    project = tmp_path / "project"
    (project / "policies").mkdir(parents=True)
    (project / "compactor.yml").write_text("name: unreachable\n")
    url = f"sc://127.0.0.1:{free_port()}"  # bound and closed again: nothing listens there
    spark = f"{{remote: '{url}'}}" if given_by == "profile" else "{conf: {spark.sql.shuffle.partitions: 2}}"
    (project / "profiles.yml").write_text(
        f"default:\n  outputs:\n    dev:\n      engine: spark\n      spark: {spark}\n")
    (project / "policies" / "t.yml").write_text(
        f"version: 1\ntables:\n  - name: t\n    path: {t}\n    compaction: {{target_file_size: 1MiB, method: rewrite, "
        "triggers: {min_input_files: 2}}\n")
    v0 = DeltaTable(str(t)).version()
    env = _env(url, **({"SPARK_REMOTE": url} if given_by == "SPARK_REMOTE" else {}))
    plan, _ = _cli(project, "plan", env=env)
    assert plan.returncode == 0, plan.stderr
    r, seconds = _cli(project, "apply", str(project / "target" / "plan.json"), env=env)
    assert r.returncode == 2, r.stdout + r.stderr
    lines = [ln for ln in r.stderr.splitlines() if ln.strip()]
    (error,) = [ln for ln in lines if "error" in ln.lower()]  # one error line, not one per action
    assert error.startswith(f"Error: cannot reach the Spark Connect server at {url}: ") and "Connection refused" in error
    assert lines[-2:] == [error, lines[-1]] and lines[-1].startswith("Hint: ") and "spark.remote" in lines[-1]
    assert "Traceback" not in r.stdout + r.stderr
    assert DeltaTable(str(t)).version() == v0  # nothing committed
    assert seconds < 30, seconds  # refused at once: no retrying for minutes
    run = json.loads((project / "target" / "run_results.json").read_text())  # the stop is recorded
    assert run["results"] and all(r["status"] == "error" and "cannot reach the Spark Connect server" in r["error"]
                                  for r in run["results"]), run["results"]
