"""Tables by name from a Hive metastore: Spark with Hive support and an embedded Derby metastore holds 12
Delta tables in 3 databases (written by Spark, several small files each) and a parquet table; a discover
over each database selects exactly the matching tables, `--select tag:` picks the policies, plan and
apply compact the Delta tables, and the parquet table is reported as unsupported. The Spark sessions run
in their own processes (one embedded Derby metastore admits one JVM at a time)."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest
from deltalake import DeltaTable

pytestmark = pytest.mark.spark

SETUP = textwrap.dedent("""
    import sys
    from compactor.formats.delta.spark import build_session
    metastore, warehouse = sys.argv[1], sys.argv[2]
    spark = build_session("local[2]", "hive-setup", {
        "spark.sql.catalogImplementation": "hive", "spark.sql.warehouse.dir": warehouse,
        "spark.hadoop.javax.jdo.option.ConnectionURL": f"jdbc:derby:;databaseName={metastore};create=true",
        "spark.driver.extraJavaOptions": f"-Dderby.stream.error.file={metastore}.log",
        "spark.sql.shuffle.partitions": "2"}, delta_jars=True)
    tables = {"sales": ["orders_1", "orders_2", "orders_3", "customers"], "ops": ["events_1", "events_2",
              "events_3", "events_4"], "hr": ["people_1", "people_2", "people_3", "people_4"]}
    for db, names in tables.items():
        spark.sql(f"CREATE DATABASE {db}")
        for name in names:
            spark.sql(f"CREATE TABLE {db}.{name} (id BIGINT, p STRING) USING delta PARTITIONED BY (p)")
            for _ in range(3):  # three appends: three small files per partition
                spark.sql(f"INSERT INTO {db}.{name} SELECT /*+ COALESCE(1) */ id, 'a' FROM range(5)")
    spark.sql("CREATE TABLE ops.raw_events (id BIGINT) USING parquet")
    spark.stop()
""")

POLICIES = """version: 1
tables:
  - name: sales
    tags: [nightly]
    discover: {catalog: meta, namespace: sales, include: ["orders_*"]}
    compaction: {target_file_size: 1MiB, triggers: {min_input_files: 2}}
  - name: ops
    tags: [nightly]
    discover: {catalog: meta, namespace: ops}
    compaction: {target_file_size: 1MiB, triggers: {min_input_files: 2}}
  - name: hr
    tags: [weekly]
    discover: {catalog: meta, namespace: hr}
    compaction: {target_file_size: 1MiB, triggers: {min_input_files: 2}}
"""


def _cli(*args: str, project: Path) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "compactor", *args, "--project-dir", str(project)],
                          capture_output=True, text=True, env={**os.environ, "COLUMNS": "200"}, timeout=600)


def test_a_discover_over_a_hive_metastore_plans_and_compacts_the_selected_delta_tables(tmp_path: Path) -> None:
    if shutil.which("java") is None:
        pytest.skip("no Java on PATH (.ci/run installs openjdk-17-jre-headless)")
    pytest.importorskip("delta", reason="delta-spark is part of the [spark] extra")
    metastore, warehouse = tmp_path / "metastore_db", tmp_path / "warehouse"
    r = subprocess.run([sys.executable, "-c", SETUP, str(metastore), str(warehouse)], capture_output=True,
                       text=True, timeout=900)
    if r.returncode != 0 and "Delta Lake jars could not be loaded" in r.stdout + r.stderr:
        pytest.skip("the Delta Lake jars could not be loaded into Spark on this machine")
    assert r.returncode == 0, r.stdout[-3000:] + r.stderr[-3000:]
    proj = tmp_path / "proj"
    (proj / "policies").mkdir(parents=True)
    (proj / "compactor.yml").write_text("name: lake\nprofile: lake\n")
    (proj / "profiles.yml").write_text(
        "lake:\n  target: dev\n  outputs:\n    dev:\n      engine: local\n"
        "      spark: {master: 'local[1]', delta_jars: true}\n"
        f"      catalogs:\n        meta: {{type: hive, metastore_db: '{metastore}', warehouse: '{warehouse}'}}\n")
    (proj / "policies" / "hive.yml").write_text(POLICIES)
    r = _cli("plan", "--select", "tag:nightly", project=proj)
    assert r.returncode == 0, r.stdout[-3000:] + r.stderr[-3000:]
    plan = json.loads((proj / "target" / "plan.json").read_text())
    tables = {t["name"]: t for t in plan["tables"]}
    delta = {f"sales/orders_{i}" for i in (1, 2, 3)} | {f"ops/events_{i}" for i in (1, 2, 3, 4)}
    assert set(tables) == delta | {"ops/raw_events"}  # no customers (glob), no hr (tag:weekly)
    (skip,) = tables["ops/raw_events"]["skipped"]
    assert skip["reason"] == "unsupported" and "parquet" in skip["message"]
    assert all(tables[n]["actions"] for n in delta)
    assert r.stderr.startswith("starting Spark (local[1]) for catalog 'meta' (hive) ..."), r.stderr  # said first
    t0 = time.monotonic()
    r = _cli("apply", str(proj / "target" / "plan.json"), project=proj)
    took = time.monotonic() - t0
    assert r.returncode == 0, r.stdout[-3000:] + r.stderr[-3000:]
    # the plan pins every location: the apply asks no catalog and starts no JVM (issue 37 item 5)
    assert "starting Spark" not in r.stderr and took < 30, (took, r.stderr)
    print(f"\napply of the saved plan (7 tables): {took:.1f}s")
    for name in delta:
        db, t = name.split("/")
        dt = DeltaTable(str(warehouse / f"{db}.db" / t))
        assert len(dt.file_uris()) == 1 and dt.to_pyarrow_table().num_rows == 15, name
    hr = DeltaTable(str(warehouse / "hr.db" / "people_1"))
    assert len(hr.file_uris()) == 3  # not selected: untouched


HOLD = textwrap.dedent("""
    import sys
    from compactor.formats.delta.spark import build_session
    metastore, warehouse = sys.argv[1], sys.argv[2]
    spark = build_session("local[1]", "holds-the-metastore", {
        "spark.sql.catalogImplementation": "hive", "spark.sql.warehouse.dir": warehouse,
        "spark.hadoop.javax.jdo.option.ConnectionURL": f"jdbc:derby:;databaseName={metastore};create=true",
        "spark.driver.extraJavaOptions": f"-Dderby.stream.error.file={metastore}.log"}, delta_jars=False)
    spark.sql("SHOW DATABASES").collect()  # Derby is booted: this process holds the metastore now
    print("holding", flush=True)
    sys.stdin.read()  # until the test closes it
""")


def test_a_metastore_another_process_holds_fails_the_plan_with_one_line_naming_catalog_table_and_cause(
        tmp_path: Path) -> None:
    """Issue 37 item 1: a Derby metastore held by a running process (a `dbt run`) made the table a skip
    `unsupported` and the plan exit 0. It is an error: one line naming the catalog, the table and the cause,
    exit 1. The plan also says that it starts Spark, before the JVM starts (item 5)."""
    if shutil.which("java") is None:
        pytest.skip("no Java on PATH (.ci/run installs openjdk-17-jre-headless)")
    metastore, warehouse = tmp_path / "metastore_db", tmp_path / "warehouse"
    holder = subprocess.Popen([sys.executable, "-c", HOLD, str(metastore), str(warehouse)], stdin=subprocess.PIPE,
                              stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                              env={**os.environ, "COMPACTOR_SPARK_LOG": str(tmp_path / "holder.log")})
    try:
        assert holder.stdout is not None and holder.stdout.readline().strip() == "holding", holder.stderr.read()
        proj = tmp_path / "proj"
        (proj / "policies").mkdir(parents=True)
        (proj / "compactor.yml").write_text("name: lake\nprofile: lake\n")
        (proj / "profiles.yml").write_text(
            "lake:\n  target: dev\n  outputs:\n    dev:\n      engine: local\n"
            "      spark: {master: 'local[1]', delta_jars: false}\n"
            f"      catalogs:\n        meta: {{type: hive, metastore_db: '{metastore}', warehouse: '{warehouse}'}}\n")
        (proj / "policies" / "events.yml").write_text(
            "version: 1\ntables:\n  - name: events\n    catalog: {name: meta, namespace: analytics}\n")
        r = _cli("plan", project=proj)
    finally:
        holder.communicate(input="", timeout=120)
    assert r.returncode == 1, r.stdout[-3000:] + r.stderr[-3000:]
    errors = [line.strip() for line in r.stdout.splitlines() if line.strip().startswith("error:")]
    assert errors == [f"error: catalog 'meta' (hive): cannot read table 'analytics.events': the Derby metastore "
                      f"{metastore} is in use by another process (a running `dbt run` or Spark session?): embedded "
                      "Derby admits one process at a time; wait for it to end, or serve the metastore "
                      "(metastore_uris)"], r.stdout
    assert "unsupported" not in r.stdout and "1 error" in r.stdout, r.stdout
    assert r.stderr.startswith("starting Spark (local[1]) for catalog 'meta' (hive) ..."), r.stderr
    assert "Traceback" not in r.stderr and "WARN" not in r.stderr, r.stderr
