"""plan_project: discover, relative paths, and one unreadable table never stops the others."""

from __future__ import annotations

import datetime as dt
from dataclasses import replace
from pathlib import Path

from compactor.api import ProjectOptions, plan
from compactor.tasks.plan_file import load_plan
from tests.apply.helpers import make_table


def _project(root: Path, tables: str) -> Path:
    (root / "policies").mkdir(parents=True)
    (root / "compactor.yml").write_text("name: p\n")
    (root / "policies" / "t.yml").write_text("version: 1\ntables:\n" + tables)
    return root


def test_discover_relative_paths_and_unreadable_tables(tmp_path: Path) -> None:
    lake = tmp_path / "proj" / "lake"
    make_table(lake / "sales" / "orders", partitions=2, appends=6)
    make_table(lake / "sales" / "refunds", partitions=1, appends=6)
    make_table(lake / "tmp" / "scratch", partitions=1, appends=6)
    (lake / "sales" / "not_a_table").mkdir(parents=True)
    p = _project(tmp_path / "proj", """
  - name: sales
    discover: {root: lake, include: ["sales/*"], exclude: ["*/refunds"]}
    compaction: {target_file_size: 1MiB, triggers: {min_input_files: 2}}
  - name: gone
    path: lake/missing
  - name: scratch
    path: lake/tmp/scratch
    compaction: {target_file_size: 1MiB, partitions: {where: "date = '2024-01-01'"}, triggers: {min_input_files: 2}}
""")
    out = p / "target" / "plan.json"
    result = plan(ProjectOptions(project_dir=p), now=dt.datetime.now(dt.UTC), out=out)
    by_name = {t.name: t for t in result.tables}
    assert set(by_name) == {"sales/sales/orders", "gone", "scratch"}
    orders = by_name["sales/sales/orders"]
    assert orders.path == str((lake / "sales" / "orders").resolve()) and len(orders.actions) == 2
    assert by_name["gone"].error and "does not exist" in by_name["gone"].error
    assert len(by_name["scratch"].actions) == 1 and by_name["scratch"].error is None
    assert result.totals.errors == 1
    assert replace(load_plan(out), digest="") == result
    # selection applies before reading anything
    only = plan(ProjectOptions(project_dir=p, select=("scratch",)))
    assert [t.name for t in only.tables] == ["scratch"]


def test_missing_discover_root_is_a_table_error_not_a_failed_plan(tmp_path: Path) -> None:
    lake = tmp_path / "proj" / "lake"
    make_table(lake / "t", partitions=1, appends=3)
    p = _project(tmp_path / "proj", """
  - name: nothing_here
    discover: {root: no_such_dir}
  - name: t
    path: lake/t
    compaction: {target_file_size: 1MiB, triggers: {min_input_files: 2}}
""")
    result = plan(ProjectOptions(project_dir=p), now=dt.datetime.now(dt.UTC))
    by_name = {t.name: t for t in result.tables}
    assert "discover root does not exist" in by_name["nothing_here"].error
    assert by_name["nothing_here"].path.endswith("no_such_dir")
    assert len(by_name["t"].actions) == 1 and result.totals.errors == 1
