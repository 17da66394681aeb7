"""Iceberg tables named by a Hive metastore served over thrift (tests/catalogs/metastore.py: Hive 2.3 on
loopback): pyiceberg's HiveCatalog writes them; a target's catalog of type hive with ``metastore_uris`` names
them. A `format: iceberg` policy plans and applies one with no JVM in compactor's process (the metastore's
thrift API through pyiceberg), a discover of the Iceberg format lists a database's Iceberg tables, and a hive
catalog compactor cannot read Iceberg tables of (an embedded Derby metastore, a server that does not answer)
is exit 1 with one line."""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

pytest.importorskip("pyiceberg", reason="pyiceberg is not installed (pip install 'compactor[iceberg]')")

from tests.catalogs.metastore import Metastore, MetastoreUnavailable, start_metastore  # noqa: E402
from tests.catalogs.test_glue_iceberg import COMPACTION, NO_JVM, named  # noqa: E402
from tests.iceberg.tables import rows, write_table  # noqa: E402


def hive_catalog(server: Metastore) -> Any:
    from pyiceberg.catalog.hive import HiveCatalog

    # Hive 2.3 knows no 'timestamp with local time zone' column (the tables' tstz)
    return HiveCatalog("meta", **{"uri": server.uri, "warehouse": server.warehouse, "hive.hive2-compatible": "true"})


@pytest.fixture(scope="module")
def metastore() -> Iterator[Metastore]:
    try:
        server = start_metastore()
    except MetastoreUnavailable as e:
        pytest.skip(f"Hive metastore unavailable: {e}")
    try:
        cat = hive_catalog(server)
        cat.create_namespace("ice")
        for name, kind in (("events_day", "day"), ("events_grp", "identity_int")):
            write_table(cat, f"ice.{name}", kind)
        yield server
    finally:
        server.stop()


def _project(root: Path, catalog: str, policies: str) -> Path:
    (root / "policies").mkdir(parents=True)
    (root / "compactor.yml").write_text("name: lakehouse\nprofile: hms\n")
    (root / "profiles.yml").write_text("hms:\n  target: prod\n  outputs:\n    prod:\n      engine: local\n"
                                       f"      catalogs:\n        meta: {catalog}\n")
    (root / "policies" / "hive.yml").write_text(policies)
    return root


def _cli(*args: str, project: Path) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "COLUMNS": "200"}
    return subprocess.run([sys.executable, "-c", NO_JVM, *args, "--project-dir", str(project)],
                          capture_output=True, text=True, env=env)


def _tables(project: Path) -> dict[str, dict[str, Any]]:
    return {t["name"]: t for t in json.loads((project / "target" / "plan.json").read_text())["tables"]}


def _served(server: Metastore) -> str:
    return (f"{{type: hive, metastore_uris: \"{server.uri}\", warehouse: \"{server.warehouse}\", "
            "hive2_compatible: true}")


def test_an_iceberg_policy_on_a_hive_table_plans_and_applies_without_a_jvm(metastore: Metastore,
                                                                           tmp_path: Path) -> None:
    proj = _project(tmp_path / "proj", _served(metastore), named("day", "meta", "events_day"))
    table = hive_catalog(metastore).load_table("ice.events_day")
    before = rows(table)
    r = _cli("plan", project=proj)
    assert r.returncode == 0, r.stdout + r.stderr
    assert "PYSPARK_LOADED=False" in r.stderr
    plan = _tables(proj)["day"]
    assert plan["format"] == "iceberg" and plan["identifier"] == {"catalog": "meta", "namespace": "ice",
                                                                  "table": "events_day"}
    assert plan["version"] == table.current_snapshot().snapshot_id
    assert sorted(a["partition"]["ts_day"] for a in plan["actions"]) == ["2024-01-01", "2024-01-02"]
    r = _cli("apply", str(proj / "target" / "plan.json"), project=proj)
    assert r.returncode == 0, r.stdout + r.stderr
    assert "PYSPARK_LOADED=False" in r.stderr
    results = json.loads((proj / "target" / "run_results.json").read_text())["results"]
    assert [x["status"] for x in results] == ["success", "success"], results
    table = hive_catalog(metastore).load_table("ice.events_day")
    assert table.current_snapshot().summary.operation.value == "replace"  # committed under the metastore's lock
    assert rows(table) == before


def test_a_discover_of_the_iceberg_format_over_a_hive_database(metastore: Metastore, tmp_path: Path) -> None:
    proj = _project(tmp_path / "proj", _served(metastore), f"""version: 1
tables:
  - name: ice
    format: iceberg
    discover: {{catalog: meta, namespace: ice, include: ["events_g*"]}}
    {COMPACTION}
""")
    r = _cli("plan", project=proj)
    assert r.returncode == 0, r.stdout + r.stderr
    assert "PYSPARK_LOADED=False" in r.stderr
    (table,) = _tables(proj).values()
    assert table["name"] == "ice/events_grp" and table["format"] == "iceberg" and table["actions"]


def test_an_embedded_derby_metastore_is_refused_naming_metastore_uris(tmp_path: Path) -> None:
    proj = _project(tmp_path / "proj", f"{{type: hive, metastore_db: \"{tmp_path / 'metastore_db'}\"}}",
                    named("t", "meta", "events_day"))
    r = _cli("plan", project=proj)
    assert r.returncode == 1, r.stdout + r.stderr
    assert "Traceback" not in r.stderr and "PYSPARK_LOADED=False" in r.stderr
    (line,) = [ln for ln in (r.stdout + r.stderr).splitlines() if "without a metastore server" in ln]
    assert "catalog 'meta' is a hive catalog" in line and "metastore_db" in line


def test_a_metastore_that_does_not_answer_is_exit_1_with_one_line(tmp_path: Path) -> None:
    with socket.socket() as sock:  # a loopback port nothing listens on
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    proj = _project(tmp_path / "proj", f"{{type: hive, metastore_uris: \"thrift://127.0.0.1:{port}\"}}",
                    named("t", "meta", "events_day"))
    r = _cli("plan", project=proj)
    assert r.returncode == 1, r.stdout + r.stderr
    assert "Traceback" not in r.stderr
    lines = [ln for ln in (r.stdout + r.stderr).splitlines() if f"hive at thrift://127.0.0.1:{port}" in ln]
    assert len(lines) == 1 and "cannot load table ice.events_day" in lines[0], r.stdout + r.stderr


@pytest.mark.spark
@pytest.mark.iceberg_jars
@pytest.mark.delta_jars
def test_the_spark_engine_rewrites_a_hive_named_iceberg_table_through_icebergs_hive_catalog(
        metastore: Metastore, iceberg_spark: Any, tmp_path: Path) -> None:
    """The spark engine loads the table through Iceberg's Java HiveCatalog on the same metastore (Spark's own
    Hive client) and commits its replace under the metastore's lock; pyiceberg reads the same rows after."""
    from click.testing import CliRunner

    from compactor.cli import cli

    cat = hive_catalog(metastore)
    write_table(cat, "ice.events_spark", "identity_int")
    table = cat.load_table("ice.events_spark")
    before, planned = rows(table), table.current_snapshot().snapshot_id
    proj = _project(tmp_path / "proj", _served(metastore), named("grp", "meta", "events_spark"))
    profiles = proj / "profiles.yml"
    profiles.write_text(profiles.read_text().replace("engine: local", "engine: spark"))

    def run(*args: str) -> Any:
        return CliRunner().invoke(cli, [*args, "--project-dir", str(proj)], catch_exceptions=False)

    r = run("plan")
    assert r.exit_code == 0, r.output
    plan = _tables(proj)["grp"]
    assert plan["engine"] == "spark" and plan["actions"], plan
    planned_paths = {p for a in plan["actions"] for b in a["bins"] for p in b}
    r = run("apply", str(proj / "target" / "plan.json"))
    assert r.exit_code == 0, r.output
    results = json.loads((proj / "target" / "run_results.json").read_text())["results"]
    assert {x["status"] for x in results} == {"success"}, results
    table = hive_catalog(metastore).load_table("ice.events_spark")
    snap = table.current_snapshot()
    assert snap.summary.operation.value == "replace" and snap.parent_snapshot_id == planned
    live = {t.file.file_path for t in table.scan().plan_files()}
    assert not planned_paths & live and all("/data/compactor-" in p for p in live if p not in planned_paths)
    assert rows(table) == before
    r = run("plan", "--detailed-exitcode")
    assert r.exit_code == 0, r.output
