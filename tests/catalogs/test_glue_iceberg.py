"""Iceberg tables named by AWS Glue (moto's S3 and Glue on loopback): pyiceberg's GlueCatalog writes them into
moto's S3 and registers them in its Glue; a target's catalog of type glue names them. A `format: iceberg`
policy plans and applies one without a JVM (pyiceberg's GlueCatalog reads and commits it, S3 reached with
the target's storage options), a discover of the Iceberg format lists only a database's Iceberg tables, a
policy that leaves its format to the default plans a Glue table registered as ICEBERG as an Iceberg table,
and one that declares `format: delta` for it is refused naming `format: iceberg`. A table Glue does not
hold is exit 1 with one line. The spark engine loads and commits one through Iceberg's Java GlueCatalog
and S3FileIO (Iceberg's aws bundle in the shared session: tests/iceberg/spark_tables.py), its outputs
written on S3 into the action's own folder, which a run stopped before its commit leaves empty."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

pytest.importorskip("pyiceberg", reason="pyiceberg is not installed (pip install 'compactor[iceberg]')")

from tests.apply.helpers import make_table as make_delta_table  # noqa: E402
from tests.iceberg.tables import rows, write_table  # noqa: E402

SECRET = "glue-ice-secret-P3q9"  # moto accepts any credentials; this value must appear in no artifact
NO_JVM = ("import sys\nfrom compactor.cli import main\nsys.argv = ['compactor'] + sys.argv[1:]\n"
          "try:\n    main()\nfinally:\n    print('PYSPARK_LOADED=' + str('pyspark' in sys.modules), file=sys.stderr)\n")


def glue_catalog(server: Any) -> Any:
    """pyiceberg's GlueCatalog on moto: Glue and S3 on the same loopback port."""
    from pyiceberg.catalog.glue import GlueCatalog

    so = server.storage_options
    return GlueCatalog("main", **{
        "glue.endpoint": server.endpoint, "client.region": "us-east-1", "client.access-key-id": "compactor-test",
        "client.secret-access-key": SECRET, "s3.endpoint": server.endpoint, "s3.region": "us-east-1",
        "s3.access-key-id": so["AWS_ACCESS_KEY_ID"], "s3.secret-access-key": so["AWS_SECRET_ACCESS_KEY"],
        "warehouse": f"{server.root_uri}/warehouse"})


@pytest.fixture(scope="module")
def glue(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Any]:
    from tests.objectstore.servers import STARTERS, EmulatorUnavailable

    try:
        server = STARTERS["s3"]()
    except EmulatorUnavailable as e:
        pytest.skip(f"moto server unavailable: {e}")
    cat = glue_catalog(server)
    cat.create_namespace("ice")
    for name, kind in (("events_day", "day"), ("events_grp", "identity_int"), ("flat", "unpartitioned")):
        write_table(cat, f"ice.{name}", kind)
    # a Delta table in the same database, registered as Spark registers one
    delta = tmp_path_factory.mktemp("lake") / "orders"
    make_delta_table(delta, partitions=1, appends=3, rows=5)
    import boto3

    boto3.client("glue", region_name="us-east-1", endpoint_url=server.endpoint, aws_access_key_id="compactor-test",
                 aws_secret_access_key=SECRET).create_table(DatabaseName="ice", TableInput={
                     "Name": "orders", "TableType": "EXTERNAL_TABLE",
                     "Parameters": {"spark.sql.sources.provider": "delta"},
                     "StorageDescriptor": {"Location": str(delta)}})
    yield server
    server.stop()


def _project(root: Path, server: Any, policies: str) -> Path:
    (root / "policies").mkdir(parents=True)
    (root / "compactor.yml").write_text("name: lakehouse\nprofile: aws\n")
    so = "".join(f"        {k}: \"{v}\"\n" for k, v in server.storage_options.items())
    (root / "profiles.yml").write_text(
        "aws:\n  target: prod\n  outputs:\n    prod:\n      engine: local\n      storage_options:\n" + so +
        "      catalogs:\n        main:\n"
        f"          type: glue\n          region: us-east-1\n          endpoint_url: {server.endpoint}\n"
        "          aws_access_key_id: compactor-test\n"
        "          aws_secret_access_key: \"{{ env_var('GLUE_SECRET') }}\"\n")
    (root / "policies" / "glue.yml").write_text(policies)
    return root


def _cli(*args: str, project: Path, server: Any) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, **server.env, "GLUE_SECRET": SECRET, "COLUMNS": "200"}
    return subprocess.run([sys.executable, "-c", NO_JVM, *args, "--project-dir", str(project)],
                          capture_output=True, text=True, env=env)


def _tables(project: Path) -> dict[str, dict[str, Any]]:
    return {t["name"]: t for t in json.loads((project / "target" / "plan.json").read_text())["tables"]}


COMPACTION = "compaction: {target_file_size: 1MiB, triggers: {min_input_files: 2}}"


def named(name: str, catalog: str, table: str) -> str:
    """A policy file naming one Iceberg table ``table`` of namespace ``ice`` in ``catalog``."""
    return (f"version: 1\ntables:\n  - name: {name}\n    format: iceberg\n"
            f"    catalog: {{name: {catalog}, namespace: ice, table: {table}}}\n    {COMPACTION}\n")


def test_an_iceberg_policy_on_a_glue_table_plans_and_applies_without_a_jvm(glue: Any, tmp_path: Path) -> None:
    proj = _project(tmp_path / "proj", glue, named("day", "main", "events_day"))
    table = glue_catalog(glue).load_table("ice.events_day")
    before = rows(table)
    r = _cli("plan", project=proj, server=glue)
    assert r.returncode == 0, r.stdout + r.stderr
    assert "PYSPARK_LOADED=False" in r.stderr
    plan = _tables(proj)["day"]
    assert plan["format"] == "iceberg" and plan["path"] == table.location()
    assert plan["identifier"] == {"catalog": "main", "namespace": "ice", "table": "events_day"}
    assert plan["version"] == table.current_snapshot().snapshot_id
    assert sorted(a["partition"]["ts_day"] for a in plan["actions"]) == ["2024-01-01", "2024-01-02"]
    assert all(p.startswith("s3://") for a in plan["actions"] for b in a["bins"] for p in b)
    r = _cli("apply", str(proj / "target" / "plan.json"), project=proj, server=glue)
    assert r.returncode == 0, r.stdout + r.stderr
    assert "PYSPARK_LOADED=False" in r.stderr
    results = json.loads((proj / "target" / "run_results.json").read_text())["results"]
    assert [x["status"] for x in results] == ["success", "success"], results
    table = glue_catalog(glue).load_table("ice.events_day")
    assert table.current_snapshot().summary.operation.value == "replace"
    assert rows(table) == before
    leaked = [str(p) for p in (proj / "target").rglob("*") if p.is_file() and SECRET in p.read_text(errors="replace")]
    assert not leaked and SECRET not in r.stdout + r.stderr


def test_a_discover_of_the_iceberg_format_lists_only_the_iceberg_tables(glue: Any, tmp_path: Path) -> None:
    proj = _project(tmp_path / "proj", glue, f"""version: 1
tables:
  - name: ice
    format: iceberg
    discover: {{catalog: main, namespace: ice, exclude: ["events_day"]}}
    {COMPACTION}
""")
    r = _cli("plan", project=proj, server=glue)
    assert r.returncode == 0, r.stdout + r.stderr
    assert "PYSPARK_LOADED=False" in r.stderr
    tables = _tables(proj)
    assert set(tables) == {"ice/events_grp", "ice/flat"}  # not the Delta table of the same database
    assert all(t["format"] == "iceberg" and t["actions"] and not t.get("error") for t in tables.values())


def test_a_glue_iceberg_table_named_by_a_policy_of_the_default_format_is_planned_as_iceberg(
        glue: Any, tmp_path: Path) -> None:
    proj = _project(tmp_path / "proj", glue, f"""version: 1
tables:
  - name: grp
    catalog: {{name: main, namespace: ice, table: events_grp}}
    {COMPACTION}
  - name: all
    discover: {{catalog: main, namespace: ice, include: ["orders", "flat"]}}
    {COMPACTION}
""")
    r = _cli("plan", project=proj, server=glue)
    assert r.returncode == 0, r.stdout + r.stderr
    assert "PYSPARK_LOADED=False" in r.stderr
    tables = _tables(proj)
    assert {n: t["format"] for n, t in tables.items()} == {"grp": "iceberg", "all/flat": "iceberg",
                                                           "all/orders": "delta"}
    assert all(t["actions"] and not t.get("error") for t in tables.values()), tables
    assert tables["grp"]["identifier"] == {"catalog": "main", "namespace": "ice", "table": "events_grp"}


def test_a_policy_declaring_delta_for_a_glue_iceberg_table_is_refused_naming_the_format(
        glue: Any, tmp_path: Path) -> None:
    proj = _project(tmp_path / "proj", glue, f"""version: 1
tables:
  - name: grp
    format: delta
    catalog: {{name: main, namespace: ice, table: events_grp}}
    {COMPACTION}
  - name: all
    format: delta
    discover: {{catalog: main, namespace: ice, include: ["flat"]}}
    {COMPACTION}
""")
    r = _cli("plan", project=proj, server=glue)
    assert r.returncode == 1, r.stdout + r.stderr
    assert "Traceback" not in r.stderr
    out = r.stdout + r.stderr
    line = next(ln for ln in out.splitlines() if "main.ice.events_grp" in ln)
    assert "registers it in format iceberg" in line and "`format: iceberg`" in line, out
    tables = _tables(proj)
    assert tables["grp"]["error"] and not tables["grp"]["actions"]
    (skip,) = tables["all/flat"]["skipped"]  # found by a discover: skipped, not an error
    assert skip["reason"] == "unsupported" and "`format: iceberg`" in skip["message"]


def test_a_table_glue_does_not_hold_is_exit_1_with_one_line(glue: Any, tmp_path: Path) -> None:
    proj = _project(tmp_path / "proj", glue, named("nope", "main", "nope"))
    r = _cli("plan", project=proj, server=glue)
    assert r.returncode == 1, r.stdout + r.stderr
    assert "Traceback" not in r.stderr and SECRET not in r.stdout + r.stderr
    lines = [ln for ln in (r.stdout + r.stderr).splitlines() if "ice.nope" in ln]
    # the endpoint is one of the target's storage options: shown as *** like every value of them
    assert len(lines) == 1 and "Iceberg catalog 'main' (glue at " in lines[0] and "has no table ice.nope" in lines[0]


@pytest.mark.spark
@pytest.mark.iceberg_jars
@pytest.mark.delta_jars
def test_the_spark_engine_rewrites_a_glue_named_iceberg_table_through_icebergs_glue_catalog(
        glue: Any, iceberg_spark: Any, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The spark engine loads the table through Iceberg's Java GlueCatalog on moto's Glue (its client signing
    with the catalog's own keys) and writes and reads its files on moto's S3 through S3FileIO (the target's
    storage options); the replace holds exactly the planned files; pyiceberg reads the same rows after."""
    from click.testing import CliRunner

    from compactor.cli import cli

    cat = glue_catalog(glue)
    write_table(cat, "ice.events_spark", "identity_int")
    table = cat.load_table("ice.events_spark")
    before, planned = rows(table), table.current_snapshot().snapshot_id
    proj = _project(tmp_path / "proj", glue, named("grp", "main", "events_spark"))
    profiles = proj / "profiles.yml"
    profiles.write_text(profiles.read_text().replace("engine: local", "engine: spark"))
    monkeypatch.setenv("GLUE_SECRET", SECRET)

    def run(*args: str) -> Any:
        return CliRunner().invoke(cli, [*args, "--project-dir", str(proj)], catch_exceptions=False)

    r = run("plan")
    assert r.exit_code == 0, r.output
    plan = _tables(proj)["grp"]
    assert plan["engine"] == "spark" and plan["actions"] and plan["version"] == planned, plan
    planned_paths = {p for a in plan["actions"] for b in a["bins"] for p in b}
    r = run("apply", str(proj / "target" / "plan.json"))
    assert r.exit_code == 0, r.output
    results = json.loads((proj / "target" / "run_results.json").read_text())["results"]
    assert results and {x["status"] for x in results} == {"success"}, results
    table = glue_catalog(glue).load_table("ice.events_spark")
    snap = table.current_snapshot()
    assert snap.summary.operation.value == "replace" and snap.parent_snapshot_id == planned
    live = {t.file.file_path for t in table.scan().plan_files()}
    assert not planned_paths & live
    added = live - {t.file.file_path for t in table.scan(snapshot_id=planned).plan_files()}
    assert added and all(p.startswith(f"{table.location()}/data/compactor-") for p in added), added
    assert {t.file.file_path for t in table.scan(snapshot_id=planned).plan_files()} - live == planned_paths
    assert rows(table) == before
    leaked = [str(p) for p in (proj / "target").rglob("*") if p.is_file() and SECRET in p.read_text(errors="replace")]
    assert not leaked and SECRET not in r.output
    r = run("plan", "--detailed-exitcode")
    assert r.exit_code == 0, r.output


def _s3_keys(server: Any, location: str, under: str) -> list[str]:
    """The keys of moto's S3 under ``under`` (relative to the table's ``location``)."""
    import boto3

    bucket, _, prefix = location.removeprefix("s3://").partition("/")
    so = server.storage_options
    s3 = boto3.client("s3", endpoint_url=server.endpoint, region_name="us-east-1",
                      aws_access_key_id=so["AWS_ACCESS_KEY_ID"], aws_secret_access_key=so["AWS_SECRET_ACCESS_KEY"])
    pages = s3.get_paginator("list_objects_v2").paginate(Bucket=bucket, Prefix=f"{prefix.rstrip('/')}/{under}")
    return [o["Key"] for page in pages for o in page.get("Contents", [])]


@pytest.mark.spark
@pytest.mark.iceberg_jars
@pytest.mark.delta_jars
def test_a_spark_rewrite_of_a_glue_table_stopped_before_its_commit_leaves_nothing_on_s3(
        glue: Any, iceberg_spark: Any, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Spark's writer writes into the action's own folder on S3 (``data/compactor-<token>``, through S3FileIO);
    a run stopped after the outputs were written and before the commit deletes that folder's files through
    the deletion gate (recovery over the journal on S3), the table is unchanged, and the next apply converges."""
    from click.testing import CliRunner

    from compactor.cli import cli
    from compactor.runtime import faults
    from tests.formats.contract.lake import Killed

    cat = glue_catalog(glue)
    write_table(cat, "ice.events_stop", "identity_int")
    table = cat.load_table("ice.events_stop")
    before, planned, location = rows(table), table.current_snapshot().snapshot_id, table.location()
    proj = _project(tmp_path / "proj", glue, named("grp", "main", "events_stop"))
    profiles = proj / "profiles.yml"
    profiles.write_text(profiles.read_text().replace("engine: local", "engine: spark"))
    monkeypatch.setenv("GLUE_SECRET", SECRET)

    def run(*args: str) -> Any:
        return CliRunner().invoke(cli, [*args, "--project-dir", str(proj)], catch_exceptions=False)

    assert run("plan").exit_code == 0
    written: list[str] = []

    def hook(name: str) -> None:
        if name == "iceberg.outputs_written" and not written:
            written.extend(_s3_keys(glue, location, "data/compactor-"))
            raise Killed(name)

    previous = faults.set_hook(hook)
    try:
        with pytest.raises(Killed):
            run("apply", str(proj / "target" / "plan.json"))
    finally:
        faults.set_hook(previous)
    assert any(k.endswith(".parquet") for k in written), written  # Spark wrote its outputs on S3
    assert _s3_keys(glue, location, "data/compactor-") == []  # and they were deleted: no snapshot names them
    table = glue_catalog(glue).load_table("ice.events_stop")
    assert table.current_snapshot().snapshot_id == planned and rows(table) == before
    r = run("apply", str(proj / "target" / "plan.json"))
    assert r.exit_code == 0, r.output
    table = glue_catalog(glue).load_table("ice.events_stop")
    assert table.current_snapshot().summary.operation.value == "replace" and rows(table) == before
    assert run("plan", "--detailed-exitcode").exit_code == 0


def test_a_glue_catalog_maps_to_icebergs_glue_catalog_and_s3_file_io_properties() -> None:
    """The Java side gets the same Glue (endpoint, catalog id, region) and S3 (the storage options' endpoint,
    path-style, and keys; the catalog's keys when the storage options name none) as pyiceberg."""
    from compactor.formats.iceberg.spark import java_catalog_properties
    from compactor.models.catalog import CatalogSettings
    from compactor.runtime.iceberg_catalog import settings_from

    glue = {"region": "eu-west-1", "endpoint_url": "http://127.0.0.1:1", "catalog_id": "123",
            "aws_access_key_id": "AK", "aws_secret_access_key": "SK", "aws_session_token": "ST"}
    own = settings_from(CatalogSettings("main", "glue", glue), {})
    assert java_catalog_properties(own) == {
        "catalog-impl": "org.apache.iceberg.aws.glue.GlueCatalog", "io-impl": "org.apache.iceberg.aws.s3.S3FileIO",
        "client.region": "eu-west-1", "glue.endpoint": "http://127.0.0.1:1", "glue.id": "123",
        "s3.access-key-id": "AK", "s3.secret-access-key": "SK", "s3.session-token": "ST"}
    s3 = {"AWS_ENDPOINT_URL": "http://127.0.0.1:2", "AWS_ACCESS_KEY_ID": "S3K", "aws_secret_access_key": "S3S"}
    props = java_catalog_properties(settings_from(CatalogSettings("main", "glue", glue), s3))
    assert {k: v for k, v in props.items() if k.startswith("s3.")} == {
        "s3.endpoint": "http://127.0.0.1:2", "s3.access-key-id": "S3K", "s3.secret-access-key": "S3S",
        "s3.path-style-access": "true"}
    bare = java_catalog_properties(settings_from(CatalogSettings("main", "glue", {}), {}))
    assert bare == {"catalog-impl": "org.apache.iceberg.aws.glue.GlueCatalog",
                    "io-impl": "org.apache.iceberg.aws.s3.S3FileIO"}  # the driver's default AWS chain and region
