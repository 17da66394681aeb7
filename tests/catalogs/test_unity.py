"""Tables by name from Unity Catalog's REST API (compactor/catalogs/unity.py, urllib, no JVM).

Against a real server when COMPACTOR_TEST_UNITY_URL names one (scripts/unity-catalog-server builds and starts
the open-source one on loopback): a schema of its own holding 52 Delta tables
(two pages of listTables), a parquet table, a view and an excluded table, deleted afterwards with all it
holds; a discover plans and compacts the Delta tables and reports the others as unsupported; a named table
resolves through the profile's default UC catalog; the token appears in no output or artifact.

Without a server: the profile's unity options are validated at their profiles.yml line, a refused connection
and a bad host are one clear line each, and TableInfo's table types and formats map as the spec lists them.
"""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
import urllib.parse
import urllib.request
import uuid
from pathlib import Path
from typing import Any

import pytest

from compactor.catalogs.unity import UnityCatalog
from compactor.errors import CatalogError
from compactor.models.catalog import CatalogSettings

SECRET = "uc-token-Wq73pLx9"  # this value must appear in no output and no artifact
LIVE_URL = os.environ.get("COMPACTOR_TEST_UNITY_URL", "")
LIVE_TOKEN = os.environ.get("COMPACTOR_TEST_UNITY_TOKEN", "")
LIVE_CATALOG = os.environ.get("COMPACTOR_TEST_UNITY_CATALOG", "unity")
NO_SERVER = ("COMPACTOR_TEST_UNITY_URL is not set, so no Unity Catalog server is known: its server is not "
             "published to Maven Central or PyPI (only clients are) and the test suite starts none. To run this "
             "test, build and start one on loopback from a checkout of github.com/unitycatalog/unitycatalog "
             "(scripts/unity-catalog-server CHECKOUT 8081) and set COMPACTOR_TEST_UNITY_URL=http://127.0.0.1:8081 "
             "(optionally COMPACTOR_TEST_UNITY_TOKEN, and COMPACTOR_TEST_UNITY_CATALOG, default 'unity')")

NO_JVM = ("import sys\nfrom compactor.cli import main\nsys.argv = ['compactor'] + sys.argv[1:]\n"
          "try:\n    main()\nfinally:\n    print('PYSPARK_LOADED=' + str('pyspark' in sys.modules), file=sys.stderr)\n")


def _free_port() -> int:
    """A loopback port nothing listens on (bound, then released)."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _project(root: Path, host: str, policies: str, *, extra: str = "          catalog: unity\n") -> Path:
    (root / "policies").mkdir(parents=True)
    (root / "compactor.yml").write_text("name: lakehouse\nprofile: uc\n")
    (root / "profiles.yml").write_text(
        "uc:\n  target: prod\n  outputs:\n    prod:\n      engine: local\n      catalogs:\n        uc:\n"
        f"          type: unity\n          host: {host}\n"
        "          token: \"{{ env_var('UC_TOKEN') }}\"\n" + extra)
    (root / "policies" / "uc.yml").write_text(policies)
    return root


def _cli(*args: str, project: Path, token: str = SECRET) -> subprocess.CompletedProcess:
    env = {**os.environ, "UC_TOKEN": token, "COLUMNS": "200"}
    return subprocess.run([sys.executable, "-c", NO_JVM, *args, "--project-dir", str(project)],
                          capture_output=True, text=True, env=env, timeout=300)


def _leaks(project: Path, r: subprocess.CompletedProcess, secret: str) -> list[str]:
    found = [str(p) for p in (project / "target").rglob("*") if p.is_file() and secret in p.read_text(errors="replace")]
    return found + [name for name, text in (("stdout", r.stdout), ("stderr", r.stderr)) if secret in text]


# -- without a server ---------------------------------------------------------------------------------------

NAMED = """version: 1
tables:
  - name: orders
    catalog: {name: uc, namespace: sales}
    compaction: {target_file_size: 1MiB}
"""


def test_the_profile_schema_accepts_the_unity_options(tmp_path: Path) -> None:
    from compactor.policy.schema import load_schema

    entry = load_schema("profiles.schema.json")["additionalProperties"]["properties"]["outputs"][
        "additionalProperties"]["properties"]["catalogs"]["additionalProperties"]
    assert "unity" in entry["properties"]["type"]["enum"]
    assert {"host", "token", "catalog"} <= set(entry["properties"])
    proj = _project(tmp_path / "p", f"https://127.0.0.1:{_free_port()}", NAMED)
    r = _cli("validate", project=proj)  # validate reads the profile and contacts no catalog
    assert r.returncode == 0, r.stdout + r.stderr
    assert not _leaks(proj, r, SECRET)


@pytest.mark.parametrize(("host", "extra", "code", "at", "says"), [
    ("http://127.0.0.1:8080", "          region: us-east-1\n", "catalog_option", "profiles.yml:11:19",
     "`region` is not an option of a unity catalog"),
    ("http://127.0.0.1:8080", "          tokn: x\n", "unknown_key", "profiles.yml:11:11", "did you mean 'token'"),
    ("ftp://uc.example", "", "invalid_format", "profiles.yml:9:17", "'ftp://uc.example' has an invalid format"),
])
def test_an_option_a_unity_catalog_does_not_take_is_rejected_at_its_line(tmp_path: Path, host: str, extra: str,
                                                                          code: str, at: str, says: str) -> None:
    proj = _project(tmp_path / "p", host, NAMED, extra=extra)
    r = _cli("validate", project=proj)
    assert r.returncode == 1, r.stdout + r.stderr
    assert f"{at}: {code}" in r.stdout and says in r.stdout, r.stdout + r.stderr
    assert "Traceback" not in r.stderr and not _leaks(proj, r, SECRET)


def test_a_unity_catalog_without_host_is_rejected_at_its_entry(tmp_path: Path) -> None:
    proj = _project(tmp_path / "p", "http://127.0.0.1:8080", NAMED)
    text = (proj / "profiles.yml").read_text().replace("          host: http://127.0.0.1:8080\n", "")
    (proj / "profiles.yml").write_text(text)
    r = _cli("validate", project=proj)
    assert r.returncode == 1 and "profiles.yml:8:11: missing_key required key 'host'" in r.stdout, r.stdout + r.stderr


def test_a_refused_connection_is_one_clear_line_without_the_token(tmp_path: Path) -> None:
    port = _free_port()
    proj = _project(tmp_path / "p", f"http://127.0.0.1:{port}", NAMED + """  - name: sales
    discover: {catalog: uc, namespace: main.sales}
""")
    r = _cli("plan", project=proj)
    assert r.returncode == 1, r.stdout + r.stderr
    out = r.stdout + r.stderr
    assert "Traceback" not in out and "PYSPARK_LOADED=False" in r.stderr
    refused = f"cannot connect to http://127.0.0.1:{port}: Connection refused"
    read = [ln for ln in out.splitlines() if "cannot read table 'unity.sales.orders'" in ln]
    listed = [ln for ln in out.splitlines() if "cannot list the tables of schema 'main.sales'" in ln]
    assert len(read) == 1 and refused in read[0] and "catalog 'uc' (unity)" in read[0], out
    assert len(listed) == 1 and refused in listed[0], out
    assert not _leaks(proj, r, SECRET)


@pytest.mark.parametrize("host", ["localhost:8080", "ftp://uc.example", "http://", "http://uc.example:port",
                                  f"http://user:{SECRET}@uc.example", "http://uc.example/?x=1"])
def test_an_invalid_host_is_a_clear_error(host: str) -> None:
    with pytest.raises(CatalogError) as e:
        UnityCatalog(CatalogSettings("uc", "unity", {"host": host, "token": SECRET}))
    message = str(e.value)
    assert message.startswith("catalog 'uc' (unity): host") and "\n" not in message
    assert SECRET not in message


def test_a_namespace_is_catalog_dot_schema_or_a_schema_of_the_default_catalog() -> None:
    bare = UnityCatalog(CatalogSettings("uc", "unity", {"host": "http://127.0.0.1:1"}))
    for namespace in ("sales", "a.b.c", "", ".sales"):
        with pytest.raises(CatalogError, match=r"namespace '.*' is not <catalog>\.<schema>"):
            bare.list_tables(namespace)
    assert bare._schema("main.sales") == ("main", "sales")
    defaulted = UnityCatalog(CatalogSettings("uc", "unity", {"host": "http://127.0.0.1:1", "catalog": "main"}))
    assert defaulted._schema("sales") == ("main", "sales") and defaulted._schema("other.sales") == ("other", "sales")


def test_table_types_and_formats_map_as_the_spec_lists_them() -> None:
    uc = UnityCatalog(CatalogSettings("uc", "unity", {"host": "https://uc.example/api/2.1/unity-catalog/"}))
    assert uc._base == "https://uc.example"

    def table(table_type: str, fmt: str | None, location: str | None = "s3://lake/t") -> Any:
        info = {"name": "t", "table_type": table_type, "data_source_format": fmt, "storage_location": location}
        return uc._table("main.sales", info, "t")

    for kind in ("MANAGED", "EXTERNAL"):
        t = table(kind, "DELTA")
        assert (t.format, t.location, t.qualified_name) == ("delta", "s3://lake/t", "uc.main.sales.t")
    assert table("EXTERNAL", "DELTA", "file:///lake/t").location == "/lake/t"
    assert "no location" in table("EXTERNAL", "DELTA", None).reason
    for kind, says in (("VIEW", "a view"), ("METRIC_VIEW", "a metric view"),
                       ("MATERIALIZED_VIEW", "pipeline"), ("STREAMING_TABLE", "pipeline")):
        t = table(kind, "DELTA" if "VIEW" not in kind else None)
        assert t.format is None and says in t.reason, t
    for fmt in ("PARQUET", "CSV", "JSON", "AVRO", "ORC", "TEXT"):
        t = table("EXTERNAL", fmt)
        assert t.format is None and f"a {fmt} table" in t.reason and "Delta" in t.reason
    assert "Iceberg" in str(table("MANAGED", "ICEBERG").reason)


# -- against a real server ----------------------------------------------------------------------------------

def _uc(method: str, path: str, body: dict[str, Any] | None = None) -> dict[str, Any]:
    request = urllib.request.Request(f"{LIVE_URL.rstrip('/')}/api/2.1/unity-catalog{path}", method=method,
                                     data=json.dumps(body).encode() if body is not None else None,
                                     headers={"Content-Type": "application/json", "Accept": "application/json"})
    if LIVE_TOKEN:
        request.add_header("Authorization", f"Bearer {LIVE_TOKEN}")
    with urllib.request.urlopen(request, timeout=30) as response:
        text = response.read()
    return json.loads(text) if method != "DELETE" else {}  # the open-source server answers a DELETE "200 OK"


@pytest.fixture(scope="module")
def unity(tmp_path_factory: pytest.TempPathFactory):
    if not LIVE_URL:
        pytest.skip(NO_SERVER)
    from tests.apply.helpers import make_table

    schema = f"compactor_test_{uuid.uuid4().hex[:8]}"
    lake = tmp_path_factory.mktemp("uc-lake")
    _uc("POST", "/schemas", {"name": schema, "catalog_name": LIVE_CATALOG})
    created: list[str] = []
    try:
        def register(name: str, **info: Any) -> None:
            _uc("POST", "/tables", {"name": name, "catalog_name": LIVE_CATALOG, "schema_name": schema,
                                    "columns": [], **info})
            created.append(f"{LIVE_CATALOG}.{schema}.{name}")

        for i in range(52):  # more than listTables' largest page (50)
            path = lake / f"orders_{i:02d}"
            make_table(path, partitions=1, appends=3, rows=5)
            register(f"orders_{i:02d}", table_type="EXTERNAL", data_source_format="DELTA",
                     storage_location=path.as_uri())
        make_table(lake / "orders_tmp0", partitions=1, appends=3, rows=5)
        register("orders_tmp0", table_type="EXTERNAL", data_source_format="DELTA",
                 storage_location=(lake / "orders_tmp0").as_uri())
        (lake / "orders_raw").mkdir()
        register("orders_raw", table_type="EXTERNAL", data_source_format="PARQUET",
                 storage_location=(lake / "orders_raw").as_uri())
        register("orders_view", table_type="VIEW", view_definition=f"SELECT * FROM {schema}.orders_00")
        yield schema, lake
    finally:
        for full in created:
            try:
                _uc("DELETE", "/tables/" + urllib.parse.quote(full, safe=""))
            except Exception:  # noqa: BLE001 - the schema's forced delete below takes what is left
                pass
        _uc("DELETE", f"/schemas/{urllib.parse.quote(f'{LIVE_CATALOG}.{schema}', safe='')}?force=true")


DISCOVER = """version: 1
tables:
  - name: orders
    discover: {catalog: uc, namespace: NAMESPACE, include: ["orders_*"], exclude: ["orders_tmp*"]}
    compaction: {target_file_size: 1MiB, triggers: {min_input_files: 2}}
"""


def test_a_discover_over_unity_plans_the_delta_tables_and_skips_the_rest(unity, tmp_path: Path) -> None:
    schema, lake = unity
    secret = LIVE_TOKEN or SECRET
    first = _uc("GET", f"/tables?catalog_name={LIVE_CATALOG}&schema_name={schema}&max_results=50")
    assert len(first["tables"]) == 50 and first.get("next_page_token")  # the listing takes two pages
    proj = _project(tmp_path / "p", LIVE_URL, DISCOVER.replace("NAMESPACE", f"{LIVE_CATALOG}.{schema}"))
    r = _cli("plan", project=proj, token=secret)
    assert r.returncode == 0, r.stdout + r.stderr
    assert "PYSPARK_LOADED=False" in r.stderr
    tables = {t["name"]: t for t in json.loads((proj / "target" / "plan.json").read_text())["tables"]}
    delta = {f"orders/orders_{i:02d}" for i in range(52)}
    assert set(tables) == delta | {"orders/orders_raw", "orders/orders_view"}  # both pages; no orders_tmp0
    assert all(tables[n]["actions"] and not tables[n].get("error") for n in delta)
    assert tables["orders/orders_07"]["path"] == str(lake / "orders_07")
    for name, says in (("orders/orders_raw", "a PARQUET table"), ("orders/orders_view", "a view")):
        (skip,) = tables[name]["skipped"]
        assert skip["reason"] == "unsupported" and says in skip["message"], skip
    r = _cli("apply", str(proj / "target" / "plan.json"), project=proj, token=secret)
    assert r.returncode == 0, r.stdout + r.stderr
    results = json.loads((proj / "target" / "run_results.json").read_text())
    assert {x["table"] for x in results["results"] if x["status"] == "success"} == delta
    assert not _leaks(proj, r, secret)


def test_a_named_unity_table_resolves_through_the_default_catalog(unity, tmp_path: Path) -> None:
    schema, lake = unity
    secret = LIVE_TOKEN or SECRET
    proj = _project(tmp_path / "p", LIVE_URL, f"""version: 1
tables:
  - name: orders_tmp0
    catalog: {{name: uc, namespace: {schema}}}
    compaction: {{target_file_size: 1MiB, triggers: {{min_input_files: 2}}}}
  - name: missing
    catalog: {{name: uc, namespace: {schema}, table: nope}}
""", extra=f"          catalog: {LIVE_CATALOG}\n")
    r = _cli("plan", project=proj, token=secret)
    assert r.returncode == 1, r.stdout + r.stderr  # the missing table is an error; the other is planned
    out = r.stdout + r.stderr
    assert "Traceback" not in out and "PYSPARK_LOADED=False" in r.stderr
    (line,) = [ln for ln in out.splitlines() if f"cannot read table '{LIVE_CATALOG}.{schema}.nope'" in ln]
    assert "HTTP 404 TABLE_NOT_FOUND" in line, line
    tables = {t["name"]: t for t in json.loads((proj / "target" / "plan.json").read_text())["tables"]}
    assert tables["orders_tmp0"]["path"] == str(lake / "orders_tmp0") and tables["orders_tmp0"]["actions"]
    assert not _leaks(proj, r, secret)
