"""Tables by name from AWS Glue (moto's Glue server on loopback, boto3, no JVM): 50 tables in two databases,
45 Delta tables registered as Spark and Databricks register them and 5 Iceberg tables (written through
pyiceberg's GlueCatalog into moto's S3); a discover over the catalog selects exactly the matching ones,
plans and compacts the Delta tables and the Iceberg ones (each in its format: Glue's table_type says
ICEBERG), starts no JVM, and writes the catalog's credentials nowhere."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from tests.apply.helpers import make_table
from tests.catalogs.test_glue_iceberg import glue_catalog
from tests.iceberg.tables import write_table

SECRET = "glue-secret-Zq81hX"  # moto accepts any credentials; this value must appear in no artifact


@pytest.fixture(scope="module")
def glue(tmp_path_factory: pytest.TempPathFactory):
    from tests.objectstore.servers import STARTERS, EmulatorUnavailable

    try:
        server = STARTERS["s3"]()  # moto's server answers Glue on the same port
    except EmulatorUnavailable as e:
        pytest.skip(f"moto server unavailable: {e}")
    import boto3

    client = boto3.client("glue", region_name="us-east-1", endpoint_url=server.endpoint,
                          aws_access_key_id="compactor-test", aws_secret_access_key=SECRET)
    lake = tmp_path_factory.mktemp("lake")
    ice = glue_catalog(server)
    STORAGE_OPTIONS.update(server.storage_options)
    layout = {"sales": [f"orders_{i:02d}" for i in range(20)] + [f"orders_tmp{i}" for i in range(4)]
              + [f"customers_{i}" for i in range(6)],
              "ops": [f"events_{i:02d}" for i in range(15)]}
    iceberg = {"sales": ["orders_ice1", "orders_ice2", "customers_ice"], "ops": ["events_ice1", "events_ice2"]}
    for db, names in layout.items():
        client.create_database(DatabaseInput={"Name": db})
        for i, name in enumerate(names):
            path = lake / db / name
            make_table(path, partitions=1, appends=3, rows=5)
            serde = {"SerializationLibrary": "org.apache.hadoop.hive.ql.io.parquet.serde.ParquetHiveSerDe",
                     "Parameters": {"path": str(path)} if i % 2 else {}}
            client.create_table(DatabaseName=db, TableInput={
                "Name": name, "TableType": "EXTERNAL_TABLE",
                "Parameters": {"spark.sql.sources.provider": "delta", "EXTERNAL": "TRUE"},
                # odd tables as Spark stores a Delta table in its own way: the path in the serde, a placeholder here
                "StorageDescriptor": {"Location": f"{path}-__PLACEHOLDER__" if i % 2 else str(path), "SerdeInfo": serde},
            })
        for name in iceberg[db]:
            write_table(ice, f"{db}.{name}", "unpartitioned")
    yield server
    server.stop()


STORAGE_OPTIONS: dict[str, str] = {}


def _project(root: Path, endpoint: str, policies: str) -> Path:
    (root / "policies").mkdir(parents=True)
    (root / "compactor.yml").write_text("name: lakehouse\nprofile: aws\n")
    so = "".join(f"        {k}: \"{v}\"\n" for k, v in STORAGE_OPTIONS.items())  # the Iceberg tables' S3
    (root / "profiles.yml").write_text(
        "aws:\n  target: prod\n  outputs:\n    prod:\n      engine: local\n      storage_options:\n" + so +
        "      catalogs:\n        main:\n"
        f"          type: glue\n          region: us-east-1\n          endpoint_url: {endpoint}\n"
        "          aws_access_key_id: compactor-test\n"
        "          aws_secret_access_key: \"{{ env_var('GLUE_SECRET') }}\"\n")
    (root / "policies" / "glue.yml").write_text(policies)
    return root


POLICIES = """version: 1
tables:
  - name: sales
    discover: {catalog: main, namespace: sales, include: ["orders_*"], exclude: ["orders_tmp*"]}
    compaction: {target_file_size: 1MiB, triggers: {min_input_files: 2}}
  - name: ops
    discover: {catalog: main, namespace: ops}
    compaction: {target_file_size: 1MiB, triggers: {min_input_files: 2}}
"""

NO_JVM = ("import sys\nfrom compactor.cli import main\nsys.argv = ['compactor'] + sys.argv[1:]\n"
          "try:\n    main()\nfinally:\n    print('PYSPARK_LOADED=' + str('pyspark' in sys.modules), file=sys.stderr)\n")


def _cli(*args: str, project: Path) -> subprocess.CompletedProcess:
    env = {**os.environ, "GLUE_SECRET": SECRET, "COLUMNS": "200"}
    return subprocess.run([sys.executable, "-c", NO_JVM, *args, "--project-dir", str(project)],
                          capture_output=True, text=True, env=env)


def test_a_discover_over_glue_plans_the_matching_delta_and_iceberg_tables(glue, tmp_path: Path) -> None:
    proj = _project(tmp_path / "proj", glue.endpoint, POLICIES)
    r = _cli("plan", project=proj)
    assert r.returncode == 0, r.stdout + r.stderr
    assert "PYSPARK_LOADED=False" in r.stderr  # names resolved through Glue's API: no JVM, no pyspark
    plan = json.loads((proj / "target" / "plan.json").read_text())
    tables = {t["name"]: t for t in plan["tables"]}
    want = {f"sales/orders_{i:02d}" for i in range(20)} | {"sales/orders_ice1", "sales/orders_ice2"} \
        | {f"ops/events_{i:02d}" for i in range(15)} | {"ops/events_ice1", "ops/events_ice2"}
    assert set(tables) == want  # the include/exclude globs: no orders_tmp*, no customers_*
    delta = [t for n, t in tables.items() if "_ice" not in n]
    assert len(delta) == 35 and all(t["actions"] and not t.get("error") for t in delta)
    assert {t["format"] for t in delta} == {"delta"}
    iceberg = [t for n, t in tables.items() if "_ice" in n]
    assert len(iceberg) == 4 and all(t["format"] == "iceberg" and t["actions"] and not t.get("error") for t in iceberg)
    assert tables["sales/orders_01"]["path"].endswith("/sales/orders_01")  # the serde path, not the placeholder
    # each table's name in the catalog, which apply hands to its format (with the catalog's settings)
    assert tables["sales/orders_01"]["identifier"] == {"catalog": "main", "namespace": "sales", "table": "orders_01"}
    r = _cli("apply", str(proj / "target" / "plan.json"), project=proj)
    assert r.returncode == 0, r.stdout + r.stderr
    results = json.loads((proj / "target" / "run_results.json").read_text())
    assert {x["table"] for x in results["results"] if x["status"] == "success"} == set(tables)
    artifacts = [p for p in (proj / "target").rglob("*") if p.is_file()]
    leaked = [str(p) for p in artifacts if SECRET in p.read_text(errors="replace")]
    assert not leaked and SECRET not in r.stdout + r.stderr


def test_an_undeclared_catalog_or_a_missing_database_is_a_clear_error(glue, tmp_path: Path) -> None:
    proj = _project(tmp_path / "proj", glue.endpoint, POLICIES.replace("catalog: main, namespace: ops",
                                                                       "catalog: hive, namespace: ops"))
    r = _cli("validate", project=proj)
    assert r.returncode == 1 and "unknown_catalog" in r.stdout and "glue.yml:7:" in r.stdout, r.stdout + r.stderr
    proj2 = _project(tmp_path / "proj2", glue.endpoint, POLICIES.replace("namespace: ops", "namespace: nope"))
    r = _cli("plan", project=proj2)
    assert r.returncode == 1, r.stdout + r.stderr
    assert "cannot list the tables of database 'nope'" in r.stdout + r.stderr and "Traceback" not in r.stderr
    assert SECRET not in r.stdout + r.stderr


def test_a_table_named_in_glue_is_planned_without_a_jvm(glue, tmp_path: Path) -> None:
    proj = _project(tmp_path / "proj", glue.endpoint, """version: 1
tables:
  - name: customers_3
    catalog: {name: main, namespace: sales}
    compaction: {target_file_size: 1MiB, triggers: {min_input_files: 2}}
  - name: ice
    catalog: {name: main, namespace: sales, table: customers_ice}
    compaction: {target_file_size: 1MiB, triggers: {min_input_files: 2}}
""")
    r = _cli("plan", project=proj)
    assert r.returncode == 0, r.stdout + r.stderr
    assert "PYSPARK_LOADED=False" in r.stderr
    tables = {t["name"]: t for t in json.loads((proj / "target" / "plan.json").read_text())["tables"]}
    # customers_* are outside the discover test's globs: still small files here, whatever ran first
    assert tables["customers_3"]["path"].endswith("/sales/customers_3") and tables["customers_3"]["actions"]
    assert tables["customers_3"]["identifier"] == {"catalog": "main", "namespace": "sales", "table": "customers_3"}
    # Glue's table_type says ICEBERG: an Iceberg table, read through pyiceberg's GlueCatalog (customers_ice is
    # outside the discover test's globs too)
    assert tables["ice"]["format"] == "iceberg" and tables["ice"]["actions"] and not tables["ice"].get("error")


def test_a_saved_plan_pinning_a_glue_table_without_its_identifier_still_applies(glue, tmp_path: Path) -> None:
    """A plan written before plans recorded a catalog table's identifier pins the location (and the table id)
    alone: it loads, and apply takes the table there without asking Glue."""
    from compactor.planning.plan import plan_digest

    proj = _project(tmp_path / "proj", glue.endpoint, """version: 1
tables:
  - name: customers_4
    catalog: {name: main, namespace: sales}
    compaction: {target_file_size: 1MiB, triggers: {min_input_files: 2}}
""")
    assert _cli("plan", project=proj).returncode == 0
    plan = proj / "target" / "plan.json"
    doc = json.loads(plan.read_text())
    (table,) = doc["tables"]
    assert table.pop("identifier") == {"catalog": "main", "namespace": "sales", "table": "customers_4"}
    assert table["table_id"] and table["actions"]
    doc.pop("digest")
    doc["digest"] = plan_digest(doc)
    plan.write_text(json.dumps(doc))
    r = _cli("apply", str(plan), project=proj)
    assert r.returncode == 0, r.stdout + r.stderr
    results = json.loads((proj / "target" / "run_results.json").read_text())["results"]
    assert [x["status"] for x in results] == ["success"] * len(table["actions"])
