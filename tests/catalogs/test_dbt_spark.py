"""A real dbt project (tests/catalogs/dbt_shop) run with dbt-spark's session method writes Delta tables into
a Hive metastore: incremental models appended in three runs, a table model, a seed and a view. compactor
plans from dbt's manifest with the policies written in the model YAML, a model's config() and
dbt_project.yml, locates each relation through the metastore, and compacts the tables exactly; `dbt run`
afterwards still succeeds on them. dbt runs in its own process (one embedded Derby metastore admits one
JVM at a time)."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from deltalake import DeltaTable

pytestmark = pytest.mark.spark

SHOP = Path(__file__).parent / "dbt_shop"
RUNS = Path(__file__).parent / "dbt_runs.py"
TABLES = ("events", "orders", "customers", "daily", "regions")


def _dbt(project: Path, metastore: Path, warehouse: Path, first: int, last: int, *extra: str) -> str:
    r = subprocess.run([sys.executable, str(RUNS), str(project), str(metastore), str(warehouse), str(first),
                        str(last), *extra], capture_output=True, text=True, timeout=900, cwd=project,
                       env={**os.environ, "DBT_SEND_ANONYMOUS_USAGE_STATS": "false"})
    if r.returncode != 0 and "Delta Lake jars could not be loaded" in r.stdout + r.stderr:
        pytest.skip("the Delta Lake jars could not be loaded into Spark on this machine")
    assert r.returncode == 0, r.stdout[-3000:] + r.stderr[-3000:]
    return r.stdout


def _cli(*args: str, project: Path) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "compactor", *args, "--project-dir", str(project)],
                          capture_output=True, text=True, env={**os.environ, "COLUMNS": "200"}, timeout=600)


def _rows(path: Path) -> list[tuple]:
    t = DeltaTable(str(path)).to_pyarrow_table()
    return sorted(zip(*(t.column(c).to_pylist() for c in t.column_names)))


def test_compactor_plans_and_compacts_a_dbt_projects_delta_tables_and_dbt_runs_on(tmp_path: Path) -> None:
    if shutil.which("java") is None:
        pytest.skip("no Java on PATH (.ci/run installs openjdk-17-jre-headless)")
    pytest.importorskip("delta", reason="delta-spark is part of the [spark] extra")
    pytest.importorskip("dbt.adapters.spark", reason="dbt-core and dbt-spark are part of the [dev] extra")
    shop, metastore, warehouse = tmp_path / "shop", tmp_path / "metastore_db", tmp_path / "warehouse"
    shutil.copytree(SHOP, shop)
    out = _dbt(shop, metastore, warehouse, 0, 2, "seed")
    assert out.split() == ["seed", "ok", "run", "ok", "run", "ok", "run", "ok"], out
    db = warehouse / "analytics.db"
    assert len(DeltaTable(str(db / "events")).file_uris()) == 18  # 3 runs x 3 files x 2 days

    proj = tmp_path / "lake"
    proj.mkdir()
    (proj / "compactor.yml").write_text("name: lake\nprofile: lake\ndbt: {manifest: ../shop/target/manifest.json}\n")
    (proj / "profiles.yml").write_text(
        "lake:\n  target: dev\n  outputs:\n    dev:\n      engine: local\n"
        "      spark: {master: 'local[1]', delta_jars: true}\n"
        f"      catalogs:\n        meta: {{type: hive, metastore_db: '{metastore}', warehouse: '{warehouse}'}}\n")
    before = {t: _rows(db / t) for t in TABLES}
    r = _cli("plan", project=proj)
    assert r.returncode == 0, r.stdout[-3000:] + r.stderr[-3000:]
    plan = json.loads((proj / "target" / "plan.json").read_text())
    tables = {t["name"]: t for t in plan["tables"]}
    assert set(tables) == {f"model.shop.{t}" for t in TABLES[:4]} | {"seed.shop.regions"}  # not the view
    assert {n for n, t in tables.items() if t["actions"]} == {f"model.shop.{t}" for t in TABLES[:4]}
    r = _cli("validate", project=proj)  # the view's policy is reported as ignored, where it is written
    assert r.returncode == 0 and "shop/models/schema.yml:19:20: dbt_not_a_table model.shop.v_events" in r.stdout, r.stdout
    r = _cli("apply", str(proj / "target" / "plan.json"), project=proj)
    assert r.returncode == 0, r.stdout[-3000:] + r.stderr[-3000:]
    assert "starting Spark" not in r.stderr, r.stderr  # the plan pins the locations: no metastore lookup, no JVM
    for t in TABLES[:4]:
        dt = DeltaTable(str(db / t))
        days = {p["day"] for p in dt.partitions()} if t == "events" else {None}
        assert len(dt.file_uris()) == len(days), t  # one file per partition
        assert _rows(db / t) == before[t], t

    out = _dbt(shop, metastore, warehouse, 3, 3)  # dbt appends to and rebuilds the compacted tables
    assert out.split() == ["run", "ok"], out
    events = _rows(db / "events")
    assert len(events) == 120 and sum(1 for r in events if r[2] == 3) == 30
    assert [r for r in events if r[2] != 3] == before["events"]
    assert len(_rows(db / "orders")) == 40
