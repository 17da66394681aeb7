"""The local engine compacts column-mapped tables (name and id mode; formats/delta/read/column_mapping.py), no
JVM: on copies of tables delta-spark's suites wrote, the outputs name every column by its physical name
and carry its column mapping id as the Parquet field id (nested fields too), the commit keys
partitionValues and statistics by physical names, removes spell partitionValues as their adds did, the
rows (read by delta-rs) are the same multiset, and a second plan has nothing to compact."""

from __future__ import annotations

import json
import shutil
from collections import Counter
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from deltalake import DeltaTable, QueryBuilder

from compactor.project.model import Project, Target
from compactor.tasks.apply import apply_plan
from tests.apply.helpers import plan_for
from tests.conftest import FIXTURES, FIXTURES_MISSING


def _copy(name: str, dst: Path, mode: str | None = None) -> Path:
    src = FIXTURES / name
    if not src.is_dir():
        pytest.skip(FIXTURES_MISSING)
    shutil.copytree(src, dst)
    if mode is not None:  # the same files under another mode: delta-spark writes physical names and ids in both
        first = dst / "_delta_log" / f"{0:020d}.json"
        first.write_text(first.read_text().replace('"delta.columnMapping.mode":"name"',
                                                   f'"delta.columnMapping.mode":"{mode}"'))
    return dst


def rows(table: Path) -> Counter[str]:
    data = pa.table(QueryBuilder().register("t", DeltaTable(str(table))).execute("select * from t").read_all())
    return Counter(repr(sorted(r.items())) for r in data.to_pylist())


def _mapped(fields: list[dict[str, Any]]) -> dict[str, tuple[str, int, Any]]:
    """Logical name -> (physical name, id, nested type) of each field of a Delta schema."""
    return {f["name"]: (f["metadata"]["delta.columnMapping.physicalName"], f["metadata"]["delta.columnMapping.id"],
                        f["type"]) for f in fields}


def _check_physical(arrow: pa.Schema | pa.StructType, fields: list[dict[str, Any]]) -> int:
    """Every field of ``arrow`` is one of ``fields`` by physical name with its id as field id, nested structs
    too; returns how many fields were checked."""
    by_physical = {p: (i, t) for p, i, t in _mapped(fields).values()}
    checked = 0
    for f in (arrow if isinstance(arrow, pa.Schema) else [arrow.field(k) for k in range(arrow.num_fields)]):
        assert f.name in by_physical, f"{f.name} is not a physical name of the table"
        ident, kind = by_physical[f.name]
        assert (f.metadata or {}).get(b"PARQUET:field_id") == str(ident).encode(), f.name
        checked += 1
        if isinstance(kind, dict) and kind.get("type") == "struct":
            checked += _check_physical(f.type, kind["fields"])
    return checked


@pytest.mark.parametrize(("name", "mode"), [
    ("delta-golden/dv-with-columnmapping", None),  # name mode, partitioned, deletion vectors
    ("delta-golden/table-with-columnmapping-mode-name", None),  # name mode, every type, nested structs, maps, arrays
    ("delta-golden/table-with-columnmapping-mode-name", "id"),
])
def test_local_apply_writes_physical_names_and_field_ids(tmp_path: Path, name: str, mode: str | None) -> None:
    t = _copy(name, tmp_path / "t", mode)
    before, version = rows(t), DeltaTable(str(t)).version()
    schema = json.loads(DeltaTable(str(t)).schema().to_json())["fields"]
    partitions = DeltaTable(str(t)).metadata().partition_columns
    physical = {k: v[0] for k, v in _mapped(schema).items()}
    plan = plan_for(t, target_size=2**20)
    assert [a for a in plan.tables[0].actions if a.type == "compact"], plan.tables[0].skipped
    run = apply_plan(plan, target=Target(), project=Project(name="p", root=tmp_path))
    assert run.ok and all(r.status == "success" for r in run.results), [r.error for r in run.results]
    assert rows(t) == before
    lines = [json.loads(x) for v in range(version + 1, DeltaTable(str(t)).version() + 1)
             for x in (t / "_delta_log" / f"{v:020d}.json").read_text().splitlines() if x.strip()]
    adds = [x["add"] for x in lines if "add" in x]
    removes = [x["remove"] for x in lines if "remove" in x]
    assert adds and removes
    logged = {}
    for f in sorted((t / "_delta_log").glob("*.json")):
        for x in f.read_text().splitlines():
            if x.strip() and "add" in (obj := json.loads(x)):
                logged[obj["add"]["path"]] = obj["add"]["partitionValues"]
    for r in removes:
        assert r["partitionValues"] == logged[r["path"]]  # as its add spelled them: physical names
    data_columns = {physical[c] for c in physical if c not in partitions}
    for a in adds:
        assert set(a["partitionValues"]) == {physical[c] for c in partitions}
        assert all(a["path"].startswith(f"{physical[c]}=") for c in partitions[:1])
        stats = json.loads(a["stats"])
        assert set(stats["nullCount"]) <= data_columns and stats["minValues"]
        written = pq.ParquetFile(t / a["path"]).schema_arrow
        assert {f.name for f in written} == data_columns
        assert _check_physical(written, [f for f in schema if f["name"] not in partitions]) >= len(data_columns)
    assert not [a for a in plan_for(t, target_size=2**20).tables[0].actions if a.type == "compact"]
