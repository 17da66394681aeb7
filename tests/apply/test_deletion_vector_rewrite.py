"""The local engine compacts files with deletion vectors (formats/delta/apply/deletes.py), no JVM: on copies
of tables delta-spark and delta-rs' test suites wrote, plan -> apply leaves the table's rows (read by
delta-rs, vectors applied) the same multiset, the outputs carry no vector and hold no deleted row, each
remove carries its file's descriptor exactly as the add had it, and a second plan has nothing to compact.
A vector that does not prove itself refuses its partition, nothing written."""

from __future__ import annotations

import json
import shutil
from collections import Counter
from pathlib import Path
from typing import Any

import pyarrow as pa
import pytest
from deltalake import DeltaTable, QueryBuilder

from compactor.formats.delta.read.log_replay import replay
from compactor.models.table import TableLocation
from compactor.project.model import Project, Target
from compactor.tasks.apply import apply_plan
from tests.apply.helpers import plan_for
from tests.conftest import FIXTURES, FIXTURES_MISSING

#: tables with deletion vectors, and the fewest compactions a plan of each must hold
TABLES = {
    "delta-rs/cdf-table-with-cdc-and-dvs": 1,  # 2 files, one 6 of 8 rows deleted; change data feed on
    "delta-misc/partitioned-table-with-dv-large": 4,  # delta-spark's, vectors in shared files at offsets
}
#: tables of one file with a vector over the ratio: a bin of one file is dropped, as delta-spark's OPTIMIZE
#: drops it (REORG ... APPLY (PURGE) rewrites it: the plan's purge action)
LONE = ("delta-rs/table-with-dv-small", "delta-golden/log-replay-dv-key-cases", "delta-misc/table-with-dv-small")


def _copy(name: str, dst: Path) -> Path:
    src = FIXTURES / name
    if not src.is_dir():
        pytest.skip(FIXTURES_MISSING)
    shutil.copytree(src, dst)
    # delta-spark's test suite names these vector files with a prefix its test configuration adds
    # ("test%dv%prefix-"), which the log's descriptors do not carry: as a writer names them in a real table
    for f in dst.glob("test%dv%prefix-deletion_vector_*.bin"):
        f.rename(dst / f.name.removeprefix("test%dv%prefix-"))
    return dst


def rows(table: Path) -> Counter[Any]:
    """Every live row, its deletion vector applied (delta-rs' query engine)."""
    data = pa.table(QueryBuilder().register("t", DeltaTable(str(table))).execute("select * from t").read_all())
    return Counter(tuple(sorted(r.items())) for r in data.to_pylist())


def _commit(table: Path, version: int) -> list[dict[str, Any]]:
    text = (table / "_delta_log" / f"{version:020d}.json").read_text()
    return [json.loads(line) for line in text.splitlines() if line.strip()]


@pytest.mark.parametrize("name", sorted(TABLES))
def test_local_apply_drops_deleted_rows_and_removes_carry_the_vectors(tmp_path: Path, name: str) -> None:
    t = _copy(name, tmp_path / "t")
    before, version = rows(t), DeltaTable(str(t)).version()
    vectors = replay(TableLocation(str(t))).deletion_vectors
    assert vectors
    plan = plan_for(t, target_size=2**20)
    actions = [a for a in plan.tables[0].actions if a.type == "compact"]
    assert len(actions) >= TABLES[name]
    rewritten = {p for a in actions for p in a.input_paths}
    assert rewritten & set(vectors), "no file with a deletion vector was planned"
    run = apply_plan(plan, target=Target(), project=Project(name="p", root=tmp_path))
    assert run.ok and all(r.status == "success" for r in run.results), [r.error for r in run.results]
    assert rows(t) == before
    assert all(r.rows_before == r.rows_after for r in run.results)  # live rows: the deleted ones are not counted
    after = replay(TableLocation(str(t)))
    assert not rewritten & {p for p, _ in after.live}, "a rewritten file is still live"
    lines = [a for v in range(version + 1, after.version + 1) for a in _commit(t, v)]
    removes = {r["remove"]["path"]: r["remove"] for r in lines if "remove" in r}
    adds = [a["add"] for a in lines if "add" in a]
    assert set(removes) == rewritten  # the fixtures' paths need no encoding
    last_adds = {a["add"]["path"]: a["add"] for v in range(version + 1) for a in _commit(t, v) if "add" in a}
    for path, remove in removes.items():
        assert remove.get("deletionVector") == vectors.get(path), path  # exactly as the add had it, or none
        if path in vectors:  # and the add's other fields delta-spark copies into a remove
            assert remove.get("stats") == last_adds[path].get("stats") and remove["stats"], path
            assert remove.get("tags") == last_adds[path].get("tags"), path
    assert adds and not any("deletionVector" in a for a in adds)
    assert sum(json.loads(a["stats"])["numRecords"] for a in adds) == \
        sum(1 for p in after.deletion_vectors if p in rewritten) + _live_rows(t, {a["path"] for a in adds})
    info = next(x["commitInfo"] for x in lines if "commitInfo" in x)
    assert info["operation"] == "OPTIMIZE"
    assert int(info["operationMetrics"]["numDeletionVectorsRemoved"]) == len(rewritten & set(vectors))
    assert not [a for a in plan_for(t, target_size=2**20).tables[0].actions if a.type == "compact"]


@pytest.mark.parametrize("name", LONE)
def test_a_lone_file_over_the_ratio_is_left_as_optimize_leaves_it(tmp_path: Path, name: str) -> None:
    t = _copy(name, tmp_path / "t")
    tp = plan_for(t, target_size=2**20).tables[0]
    assert not tp.actions and [s.reason for s in tp.skipped] == ["already_compact"]


def _live_rows(table: Path, paths: set[str]) -> int:
    """Rows the files ``paths`` hold, from their footers."""
    import pyarrow.parquet as pq

    return sum(pq.ParquetFile(table / p).metadata.num_rows for p in paths)


def _set_cardinality(table: Path, path: str, cardinality: int) -> None:
    """Edit the log: the add of ``path`` now claims ``cardinality`` deleted rows."""
    for f in sorted((table / "_delta_log").glob("*.json")):
        lines = f.read_text().splitlines()
        out = []
        for line in lines:
            obj = json.loads(line) if line.strip() else None
            if obj and "add" in obj and obj["add"]["path"] == path and obj["add"].get("deletionVector"):
                obj["add"]["deletionVector"]["cardinality"] = cardinality
                line = json.dumps(obj)
            out.append(line)
        f.write_text("\n".join(out) + "\n")


def test_a_vector_whose_positions_disagree_with_its_cardinality_refuses(tmp_path: Path) -> None:
    t = _copy("delta-rs/cdf-table-with-cdc-and-dvs", tmp_path / "t")
    # before anything reads the log (commits are immutable: compactor's reader keeps those it parsed)
    path = "part-00000-92f71a43-287d-4b61-bc93-321cc9a236d4.c000.snappy.parquet"
    _set_cardinality(t, path, 7)
    version, files = DeltaTable(str(t)).version(), sorted(p.name for p in t.rglob("*.parquet"))
    plan = plan_for(t, target_size=2**20)
    run = apply_plan(plan, target=Target(), project=Project(name="p", root=tmp_path))
    assert not run.ok
    [result] = run.results
    assert result.status == "verification_failed"
    assert f"the deletion vector of {path} does not prove itself" in (result.error or "")
    assert "deletes 6 row(s), its cardinality says 7" in (result.error or "")
    assert DeltaTable(str(t)).version() == version
    assert sorted(p.name for p in t.rglob("*.parquet")) == files


def test_a_vector_file_that_is_not_on_storage_refuses_each_partition_naming_it(tmp_path: Path) -> None:
    src = FIXTURES / "delta-misc/partitioned-table-with-dv-large"
    if not src.is_dir():
        pytest.skip(FIXTURES_MISSING)
    t = tmp_path / "t"
    shutil.copytree(src, t)  # its vector files keep the test suite's prefix: the descriptors name other files
    version = DeltaTable(str(t)).version()
    run = apply_plan(plan_for(t, target_size=2**20), target=Target(), project=Project(name="p", root=tmp_path))
    assert not run.ok and run.results
    for r in run.results:
        assert r.status == "verification_failed"
        assert "its file deletion_vector_" in (r.error or "") and "is not on storage" in (r.error or "")
        assert f"partCol={r.partition['partCol']}/" in (r.error or "")  # each names a file of its own partition
    assert DeltaTable(str(t)).version() == version


def test_a_partition_whose_vector_is_gone_is_refused_and_the_others_commit(tmp_path: Path) -> None:
    t = _copy("delta-misc/partitioned-table-with-dv-large", tmp_path / "t")
    gone = t / "deletion_vector_0661cff2-4d32-4f91-ba26-c77e4498683c.bin"  # partCol=8's vector
    gone.unlink()
    plan = plan_for(t, target_size=2**20)
    run = apply_plan(plan, target=Target(), project=Project(name="p", root=tmp_path))
    status = {r.partition["partCol"]: r.status for r in run.results}
    assert status == {"3": "success", "6": "success", "7": "success", "8": "verification_failed"}, status
    [refused] = [r for r in run.results if r.status != "success"]
    assert f"its file {gone.name} is not on storage" in (refused.error or "")
    live = {p for p, _ in replay(TableLocation(str(t))).live}
    assert set(next(a for a in plan.tables[0].actions if a.partition["partCol"] == "8").input_paths) <= live
