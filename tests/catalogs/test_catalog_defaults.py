"""Defaults per catalog and namespace (Polaris' order: catalog < namespace < table, under the file's and the
project's defaults): the merged values, `compile --explain` naming the layer and position of each, and an
invalid inherited value reported where it is written. Nothing here contacts the catalog."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

from compactor.project.compile import compile_project
from compactor.project.model import ProjectOptions

POLICY = """version: 1
defaults:
  compaction: {min_file_size: 8MiB}
catalogs:
  main:
    defaults:
      compaction: {target_file_size: 256MiB, triggers: {min_input_files: 4}}
    namespaces:
      sales:
        compaction: {target_file_size: 512MiB}
tables:
  - name: sales
    discover: {catalog: main, namespace: sales}
    compaction: {triggers: {min_input_files: 2}}
  - name: ops
    discover: {catalog: main, namespace: ops}
"""


def _project(root: Path, policy: str) -> Path:
    (root / "policies").mkdir(parents=True)
    (root / "compactor.yml").write_text("name: lake\nprofile: aws\ndefaults:\n  compaction: {quiet_period: 10m}\n")
    (root / "profiles.yml").write_text("aws:\n  target: prod\n  outputs:\n    prod:\n      engine: local\n"
                                       "      catalogs:\n        main: {type: glue, region: us-east-1}\n")
    (root / "policies" / "lake.yml").write_text(policy)
    return root


def test_catalog_then_namespace_then_table(tmp_path: Path) -> None:
    proj = _project(tmp_path / "p", POLICY)
    pols = {p.name: p for p in compile_project(ProjectOptions(project_dir=proj)).policies}
    sales, ops = pols["sales"].compaction, pols["ops"].compaction
    assert (sales.target_file_size, sales.triggers.min_input_files) == (512 << 20, 2)  # namespace, table
    assert (ops.target_file_size, ops.triggers.min_input_files) == (256 << 20, 4)  # catalog, catalog
    assert sales.min_file_size == ops.min_file_size == 8 << 20 and sales.quiet_period == 600
    r = subprocess.run([sys.executable, "-m", "compactor", "compile", "--explain", "--format", "json",
                        "--project-dir", str(proj)], capture_output=True, text=True, env={**os.environ})
    assert r.returncode == 0, r.stdout + r.stderr
    explained = {p["name"]: {v["key"]: (v["layer"], v["at"]) for v in p["values"]}
                 for p in json.loads(r.stdout)["policies"]}
    assert explained["sales"]["compaction.target_file_size"] == ("namespace main.sales", "policies/lake.yml:10:40")
    assert explained["sales"]["compaction.triggers.min_input_files"] == ("table", "policies/lake.yml:14:46")
    assert explained["ops"]["compaction.target_file_size"][0] == "catalog main"
    assert explained["ops"]["compaction.min_file_size"][0] == "file defaults"
    assert explained["ops"]["compaction.quiet_period"] == ("project defaults", "compactor.yml:4:30")
    text = subprocess.run([sys.executable, "-m", "compactor", "compile", "--explain", "--project-dir", str(proj)],
                          capture_output=True, text=True).stdout
    assert "compaction.target_file_size = 512MiB  [namespace main.sales: policies/lake.yml:10:40]" in text


def test_an_invalid_namespace_default_is_reported_where_it_is_written(tmp_path: Path) -> None:
    proj = _project(tmp_path / "p", POLICY.replace("{target_file_size: 512MiB}", "{target_file_size: 0}"))
    r = subprocess.run([sys.executable, "-m", "compactor", "validate", "--project-dir", str(proj)],
                       capture_output=True, text=True)
    assert r.returncode == 1, r.stdout + r.stderr
    assert "policies/lake.yml:10:" in r.stdout and "target_file_size" in r.stdout, r.stdout
