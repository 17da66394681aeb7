"""Policies written in a dbt project (tests/catalogs/dbt_shop), read from the manifest `dbt parse` writes:
no warehouse, no JVM. Each table is named by its dbt unique id, carries the node's dbt tags, is located
through the target's catalog or the node's location_root, and every diagnostic points at the dbt file and
line where the policy is written (properties YAML, a config() call, dbt_project.yml)."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

SHOP = Path(__file__).parent / "dbt_shop"
DBT = Path(sys.executable).with_name("dbt")
PROFILES = ("lake:\n  target: dev\n  outputs:\n    dev:\n      engine: local\n"
            "      catalogs:\n        meta: {type: glue, region: us-east-1}\n")


def _parse(shop: Path) -> None:
    if not DBT.exists():
        pytest.skip("dbt-core is part of the [dev] extra (no dbt next to this Python)")
    r = subprocess.run([str(DBT), "parse", "--project-dir", str(shop), "--profiles-dir", str(shop), "--quiet"],
                       capture_output=True, text=True, timeout=300, cwd=shop,
                       env={**os.environ, "DBT_SEND_ANONYMOUS_USAGE_STATS": "false"})
    assert r.returncode == 0, r.stdout[-2000:] + r.stderr[-2000:]


@pytest.fixture(scope="module")
def parsed(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The compactor project `lake` next to the parsed dbt project `shop`."""
    base = tmp_path_factory.mktemp("dbt")
    shutil.copytree(SHOP, base / "shop")
    _parse(base / "shop")
    return _lake(base)


def _lake(base: Path, dbt: str = "{manifest: ../shop/target/manifest.json}", profiles: str = PROFILES) -> Path:
    lake = base / "lake"
    lake.mkdir(exist_ok=True)
    (lake / "compactor.yml").write_text(f"name: lake\nprofile: lake\ndbt: {dbt}\n")
    (lake / "profiles.yml").write_text(profiles)
    return lake


def _cli(*args: str, project: Path) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "compactor", *args, "--project-dir", str(project)],
                          capture_output=True, text=True, env={**os.environ, "COLUMNS": "250"}, timeout=300)


def _ls(project: Path, *select: str) -> dict[str, dict]:
    r = _cli("ls", "--format", "json", *(a for s in select for a in ("--select", s)), project=project)
    assert r.returncode == 0, r.stdout + r.stderr
    return {t["name"]: t for t in json.loads(r.stdout)["tables"]}


def test_every_table_node_with_a_compactor_meta_is_a_table_named_by_its_unique_id(parsed: Path) -> None:
    tables = _ls(parsed)
    assert set(tables) == {"model.shop.events", "model.shop.orders", "model.shop.customers", "model.shop.daily",
                           "seed.shop.regions"}  # not the view, not the models without a policy
    assert tables["model.shop.events"]["location"] == "catalog meta: analytics.events"
    assert tables["model.shop.events"]["tags"] == ["nightly"]  # the model's dbt tags
    assert tables["model.shop.customers"]["tags"] == ["weekly"]  # the policy's own
    # where each policy is written, in dbt's precedence: config() call, properties YAML, dbt_project.yml
    assert tables["model.shop.orders"]["source"].startswith("dbt model.shop.orders, ")
    assert tables["model.shop.orders"]["source"].endswith("shop/models/orders.sql:2:17")
    assert tables["model.shop.events"]["source"].endswith("shop/models/schema.yml:8:11")
    assert tables["model.shop.daily"]["source"].endswith("shop/dbt_project.yml:12:11")
    assert tables["seed.shop.regions"]["source"].endswith("shop/seeds/properties.yml:6:20")
    assert "to 64MiB" in tables["model.shop.daily"]["policy"]  # dbt_project.yml's +meta for marts/


def test_select_takes_dbt_tags_and_node_names(parsed: Path) -> None:
    assert set(_ls(parsed, "tag:nightly")) == {"model.shop.events", "model.shop.orders"}
    assert set(_ls(parsed, "dbt:daily", "dbt:seed.shop.*")) == {"model.shop.daily", "seed.shop.regions"}
    r = _cli("ls", "--select", "dbt:nothing_like_it", project=parsed)
    assert r.returncode == 0 and "0 table(s)" in r.stdout


def test_validate_reports_a_policy_on_a_view_where_it_is_written(parsed: Path) -> None:
    r = _cli("validate", project=parsed)
    assert r.returncode == 0, r.stdout + r.stderr
    line = next(x for x in r.stdout.splitlines() if "dbt_not_a_table" in x)
    assert line.startswith(str((parsed.parent / "shop" / "models" / "schema.yml").resolve()) + ":19:20:")
    assert "model.shop.v_events is materialized as view" in line
    # the summary says what was read and what the policies declare (issue 37 item 12: not "2 tables")
    summary = r.stdout.splitlines()[-1]
    assert summary.startswith("OK: the dbt manifest ") and summary.endswith(
        "shop/target/manifest.json; 5 dbt nodes; 0 errors, 1 warning"), r.stdout


def test_compile_explain_says_which_dbt_file_each_value_comes_from(parsed: Path) -> None:
    r = _cli("compile", "--explain", "--select", "dbt:daily", "--select", "dbt:events", project=parsed)
    assert r.returncode == 0, r.stdout + r.stderr
    text = r.stdout
    assert "compaction.target_file_size = 64MiB  [dbt_project.yml: " in text
    assert "compaction.target_file_size = 128MiB  [dbt model: " in text and "schema.yml:9:31]" in text
    assert "catalog.table = events  [dbt manifest: " in text and "tags = ['nightly']  [dbt manifest: " in text


def test_a_policy_error_points_at_the_model_yaml_file_and_line(tmp_path: Path) -> None:
    shutil.copytree(SHOP, tmp_path / "shop")
    yml = tmp_path / "shop" / "models" / "schema.yml"
    yml.write_text(yml.read_text().replace("target_file_size: 128MiB", "target_file_size: lots")
                   .replace("tags: [weekly]", "tags: [weekly]\n        retention: {keep: 3}"))
    sql = tmp_path / "shop" / "models" / "orders.sql"
    sql.write_text(sql.read_text().replace("'min_input_files': 2", "'min_input_files': 'two'"))
    _parse(tmp_path / "shop")
    lake = _lake(tmp_path)
    r = _cli("validate", project=lake)
    assert r.returncode == 1, r.stdout + r.stderr
    errors = [x for x in r.stdout.splitlines() if ": " in x and "dbt_not_a_table" not in x and x[0] != "F"]
    shown = {x.split(": ")[0].split("shop/")[-1] for x in errors}
    # every error at once, each at the line dbt's file has it on
    assert shown == {"models/schema.yml:9:31", "models/schema.yml:15:21", "models/orders.sql:2:17"}, r.stdout
    assert any("invalid_size not a size: 'lots'" in x for x in errors)


def test_location_root_places_a_table_without_a_catalog_and_a_parquet_model_is_reported(tmp_path: Path) -> None:
    shutil.copytree(SHOP, tmp_path / "shop")
    sql = tmp_path / "shop" / "models" / "customers.sql"
    sql.write_text("{{ config(materialized='table', location_root='s3://lake/marts') }}\nselect 1 as id\n")
    sql = tmp_path / "shop" / "models" / "events.sql"
    sql.write_text(sql.read_text().replace("config(", "config(file_format='parquet', "))
    _parse(tmp_path / "shop")
    no_catalog = "lake:\n  target: dev\n  outputs:\n    dev:\n      engine: local\n"
    lake = _lake(tmp_path, profiles=no_catalog)
    r = _cli("validate", project=lake)
    assert r.returncode == 1
    out = r.stdout
    assert "dbt_unsupported_format model.shop.events is written as parquet (file_format)" in out
    assert "dbt_no_location model.shop.orders (analytics.orders) has no location" in out
    lake = _lake(tmp_path, profiles=PROFILES)  # with a catalog: the others are located through it
    tables = _ls(lake, "dbt:customers")
    assert tables["model.shop.customers"]["location"] == "s3://lake/marts/customers"


def test_a_missing_or_too_old_manifest_is_an_error_at_compactor_yml(tmp_path: Path) -> None:
    lake = _lake(tmp_path, dbt="{manifest: nowhere/manifest.json}")
    r = _cli("validate", project=lake)
    assert r.returncode == 1
    assert "compactor.yml:3:17: dbt_manifest no dbt manifest at" in r.stdout, r.stdout
    assert "run `dbt parse`" in r.stdout
    old = tmp_path / "old.json"
    old.write_text(json.dumps({"metadata": {"dbt_schema_version": "https://schemas.getdbt.com/dbt/manifest/v11.json",
                                            "dbt_version": "1.7.4"}, "nodes": {}}))
    (lake / "compactor.yml").write_text("name: lake\nprofile: lake\ndbt: {manifest: ../old.json}\n")
    r = _cli("validate", project=lake)
    assert r.returncode == 1 and "a manifest of dbt 1.7.4" in r.stdout and "dbt >= 1.8" in r.stdout, r.stdout


def test_an_unknown_dbt_catalog_is_an_error_at_compactor_yml(parsed: Path, tmp_path: Path) -> None:
    shutil.copytree(parsed.parent / "shop", tmp_path / "shop")
    lake = _lake(tmp_path, dbt="{manifest: ../shop/target/manifest.json, catalog: nope}")
    r = _cli("validate", project=lake)
    assert r.returncode == 1
    assert "compactor.yml:3:" in r.stdout and "dbt.catalog 'nope' is not defined in target 'dev' (its catalogs: meta)" \
        in r.stdout, r.stdout


def test_a_unity_catalog_locates_a_node_by_its_three_level_name(parsed: Path, tmp_path: Path) -> None:
    """dbt-databricks writes the Unity Catalog catalog as the node's database: the relation is located
    as <database>.<schema>.<alias> (the manifest is dbt-spark's, its database set as Databricks sets it)."""
    manifest = json.loads((parsed.parent / "shop" / "target" / "manifest.json").read_text())
    manifest["nodes"]["model.shop.events"]["database"] = "main"
    (tmp_path / "manifest.json").write_text(json.dumps(manifest))
    shutil.copytree(parsed.parent / "shop", tmp_path / "shop")
    uc = "lake:\n  target: dev\n  outputs:\n    dev:\n      engine: local\n" \
         "      catalogs:\n        uc: {type: unity, host: 'http://127.0.0.1:9'}\n"
    lake = _lake(tmp_path, dbt="{manifest: ../manifest.json, project_dir: ../shop}", profiles=uc)
    tables = _ls(lake, "dbt:events", "dbt:orders")
    assert tables["model.shop.events"]["location"] == "catalog uc: main.analytics.events"
    assert tables["model.shop.orders"]["location"] == "catalog uc: analytics.orders"  # no database: the default


def test_a_mistyped_dbt_selector_warns_and_names_the_closest_node(parsed: Path) -> None:
    """`ls --select dbt:event` matches no node: a warning names the closest one (issue 37 item 13)."""
    r = _cli("ls", "--select", "dbt:event", project=parsed)
    assert r.returncode == 0 and "0 table(s)" in r.stdout, r.stdout + r.stderr
    assert "'dbt:event' does not match any table; did you mean 'dbt:events'?" in r.stderr, r.stderr
