"""Helpers for apply tests: real delta-rs tables and exact row checks."""

from __future__ import annotations

import datetime as dt
import json
from collections import Counter
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any
from urllib.parse import unquote

import pyarrow as pa
import pyarrow.parquet as pq
from deltalake import DeltaTable, write_deltalake

from compactor.formats.delta.plan.actions import VacuumAction
from compactor.formats.delta.read.vacuum_listing import vacuum_candidates
from compactor.models.results import RunResults
from compactor.models.table import TableLocation
from compactor.planning.actions import Action, Precondition
from compactor.planning.plan import Plan, TablePlan
from compactor.policy.model import Compaction, TablePolicy, Triggers
from compactor.project.model import Target
from compactor.runtime import faults
from compactor.tasks.apply import apply_plan
from compactor.tasks.plan import build_plan


def make_table(path: Path, *, partitions: int = 3, appends: int = 8, rows: int = 50, start: int = 0) -> int:
    """A date-partitioned table of small files; ids are unique. Returns the next id."""
    n = start
    for _ in range(appends):
        for p in range(partitions):
            ids = list(range(n, n + rows))
            n += rows
            write_deltalake(str(path), pa.table({"date": [f"2024-01-{p + 1:02d}"] * rows,
                                                 "id": pa.array(ids, pa.int64())}),
                            partition_by=["date"], mode="append")
    return n


def ids(path: Path) -> Counter:
    """Every live row's id, read file by file (no threaded scan: see delta-compaction.md)."""
    dt_ = DeltaTable(str(path))
    uris = dt_.file_uris()
    if not uris:
        return Counter()
    # file by file: some writers (delta-spark OPTIMIZE) also store partition columns inside data files,
    # which pyarrow's multi-file read would try to merge with the hive partitions of the paths
    return Counter(i for u in uris for i in pq.ParquetFile(u).read(columns=["id"], use_threads=False)
                   .column("id").to_pylist())


def exactly_once(path: Path, expected: int) -> None:
    c = ids(path)
    dup = [k for k, v in c.items() if v > 1]
    assert not dup, f"{len(dup)} duplicated rows, e.g. {dup[:5]}"
    assert sorted(c) == list(range(expected)), f"{len(c)} distinct rows, expected {expected}"


def plan_for(path: Path, *, engine: str = "local", target_size: int = 2**20, min_input_files: int = 2,
             method: str = "rewrite") -> Plan:
    """A plan for one table. ``method`` defaults to compactor's own rewrite (the spark engine's policy
    default, auto, would run delta-spark's OPTIMIZE where the jars load)."""
    from compactor.formats.delta import FORMAT

    policy = TablePolicy(name="t", path=str(path), compaction=Compaction(
        target_file_size=target_size, min_file_size=target_size // 2, triggers=Triggers(min_input_files=min_input_files),
        method=method))
    state = FORMAT.read_state(TableLocation(str(path)), policy)  # as `compactor plan` reads it (rows live twice included)
    return build_plan([policy], {"t": state}, now=dt.datetime.now(dt.UTC), target=Target(engine=engine),
                      project_name="tests")


def on_disk_unreferenced(t: Path) -> set[str]:
    """Data files no commit ever added (removed files stay referenced by their add until VACUUM)."""
    added: set[str] = set()
    for f in (t / "_delta_log").glob("*.json"):
        for line in f.read_text().splitlines():
            if line.strip() and "add" in (obj := json.loads(line)):
                added.add(unquote(obj["add"]["path"]))
    on_disk = {str(p.relative_to(t)) for p in t.rglob("*.parquet") if not str(p.relative_to(t)).startswith("_")}
    return on_disk - added


def one_table_project(root: Path, table: Path, compaction: str = "{target_file_size: 1MiB, triggers: {min_input_files: 2}}") -> Path:
    """A compactor project at ``root`` with one Delta table policy named ``t`` for ``table``."""
    (root / "policies").mkdir(parents=True, exist_ok=True)
    (root / "compactor.yml").write_text("name: p\n")
    (root / "policies" / "t.yml").write_text(
        f"version: 1\ntables:\n  - name: t\n    path: {table}\n    compaction: {compaction}\n")
    return root


def vacuum_reviewing(files: tuple[str, ...] | None, *, dry_run_first: bool = True,
                     retention_hours: int = 0) -> VacuumAction:
    """A vacuum (at zero retention unless said) whose plan listed ``files`` (None: the plan could not list them)."""
    return VacuumAction(retention_hours=retention_hours, dry_run_first=dry_run_first, files=files,
                        files_to_delete=None if files is None else len(files),
                        precondition=Precondition.of(None, files or ()))


def listed_vacuum(uri: str, storage_options: Mapping[str, str] | None = None, *,
                  dry_run_first: bool = True) -> VacuumAction:
    """A vacuum at zero retention listing what a VACUUM would delete now, as `compactor plan` lists it."""
    files = vacuum_candidates(TableLocation(uri, storage_options), 0)
    assert files is not None and all("://" not in f and not f.startswith("/") for f in files), files
    return vacuum_reviewing(files, dry_run_first=dry_run_first)


def one_action_plan(uri: str, action: Action, storage_options: Mapping[str, str] | None = None, *,
                    engine: str = "local", partition_columns: tuple[str, ...] = ("date",)) -> Plan:
    """A plan of one table (``uri``) holding ``action`` alone, at the table's version now."""
    table = TablePlan(name="t", path=uri, format="delta", engine=engine,
                      version=DeltaTable(uri, storage_options=dict(storage_options or {}) or None).version(),
                      partition_columns=partition_columns, actions=(action,))
    return Plan(compactor_version="test", generated_at="2026-01-01T00:00:00Z", project="tests",
                target={"engine": engine}, tables=(table,))


def apply_racing_the_vacuum(plan: Plan, act: Callable[[], None] | None, **apply_kwargs: Any) -> RunResults:
    """``apply_plan(plan, **apply_kwargs)`` with ``act`` run once apply has listed a VACUUM's files and
    before it deletes any (crash point ``delta.vacuum_listed``); None: nothing runs there."""
    def hook(name: str) -> None:
        if name == "delta.vacuum_listed" and act is not None:
            act()

    previous = faults.set_hook(hook)
    try:
        return apply_plan(plan, **apply_kwargs)
    finally:
        faults.set_hook(previous)
