"""The local engine runs ``purge`` (formats/delta/apply/purge.py), no JVM: on copies of the fixture tables
delta-spark and delta-rs' test suites wrote with deletion vectors, plan -> apply purges the files with a
vector (lone files too, as REORG ... APPLY (PURGE) rewrites them), the table's rows (read by delta-rs, vectors
applied) are the same multiset, no output carries a vector, every planned file is removed with its
descriptor, the commit is recorded as delta-spark records a REORG, and a second plan purges nothing. A
purge whose planned cardinality is not what the vector deletes writes nothing."""

from __future__ import annotations

import datetime as dt
import json
from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest
from deltalake import DeltaTable

from compactor.formats.delta import FORMAT
from compactor.formats.delta.plan.purge_action import PurgeAction
from compactor.formats.delta.read.log_replay import replay
from compactor.models.table import TableLocation
from compactor.planning.plan import Plan
from compactor.policy.model import Compaction, Purge, TablePolicy, Triggers
from compactor.project.model import Project, Target
from compactor.tasks.apply import apply_plan
from compactor.tasks.plan import build_plan
from tests.apply.test_deletion_vector_rewrite import _commit, _copy, rows

#: tables with deletion vectors -> partitions the purge takes at min_deleted_ratio 0
TABLES = {
    "delta-rs/cdf-table-with-cdc-and-dvs": 1,
    "delta-misc/partitioned-table-with-dv-large": 7,  # vectors at offsets in shared files
    "delta-rs/table-with-dv-small": 1,  # a lone file: REORG rewrites it, OPTIMIZE would not
    "delta-misc/table-with-dv-small": 1,
}


def purge_plan(t: Path, *, ratio: float = 0.0, compact: bool = False) -> Plan:
    policy = TablePolicy(name="t", path=str(t), compaction=Compaction(
        enabled=compact, target_file_size=2**20, min_file_size=2**19, triggers=Triggers(min_input_files=2),
        purge=Purge(enabled=True, min_deleted_ratio=ratio)))
    state = FORMAT.read_state(TableLocation(str(t)), policy)
    return build_plan([policy], {"t": state}, now=dt.datetime.now(dt.UTC), target=Target(), project_name="tests")


def _lines(t: Path, after: int) -> list[dict[str, Any]]:
    return [a for v in range(after + 1, DeltaTable(str(t)).version() + 1) for a in _commit(t, v)]


@pytest.mark.parametrize("name", sorted(TABLES))
def test_the_local_engine_purges_the_planned_files(tmp_path: Path, name: str) -> None:
    t = _copy(name, tmp_path / "t")
    before, version = rows(t), DeltaTable(str(t)).version()
    vectors = replay(TableLocation(str(t))).deletion_vectors
    plan = purge_plan(t)
    purges = [a for a in plan.tables[0].actions if isinstance(a, PurgeAction)]
    assert len(purges) == TABLES[name] and len(plan.tables[0].actions) == len(purges)
    planned = {p for a in purges for p in a.input_paths}
    assert planned == set(vectors)
    run = apply_plan(plan, target=Target(), project=Project(name="p", root=tmp_path))
    assert run.ok and all(r.status == "success" for r in run.results), [r.error for r in run.results]
    assert all(r.rows_before == r.rows_after for r in run.results)
    assert rows(t) == before
    after = replay(TableLocation(str(t)))
    assert not after.deletion_vectors and not planned & {p for p, _ in after.live}
    lines = _lines(t, version)
    removes = {r["remove"]["path"]: r["remove"] for r in lines if "remove" in r}
    assert set(removes) == planned
    assert all(removes[p].get("deletionVector") == vectors[p] for p in planned)
    assert not [a for a in lines if "add" in a and "deletionVector" in a["add"]]
    infos = [x["commitInfo"] for x in lines if "commitInfo" in x]
    assert len(infos) == len(purges)
    assert {i["operation"] for i in infos} == {"REORG"} and all(i["operationParameters"]["applyPurge"] for i in infos)
    assert sum(int(i["operationMetrics"]["numDeletionVectorsRemoved"]) for i in infos) == len(planned)
    assert {r.details.method for r in run.results} == {"rewrite (recorded as REORG ... APPLY (PURGE))"}
    again = purge_plan(t)
    assert not again.tables[0].actions


def test_a_planned_cardinality_the_vector_does_not_delete_writes_nothing(tmp_path: Path) -> None:
    """An edited plan claiming other deleted rows than the vector holds: verification_failed before any
    file is written (fails when the purge's dropped rows are not checked against the plan: checked)."""
    t = _copy("delta-rs/cdf-table-with-cdc-and-dvs", tmp_path / "t")
    plan = purge_plan(t)
    (table,) = plan.tables
    (purge,) = table.actions
    assert isinstance(purge, PurgeAction)
    edited = replace(purge, cardinalities=tuple(n + 1 if n else n for n in purge.cardinalities),
                     deleted_rows=purge.deleted_rows + 1)
    plan = replace(plan, tables=(replace(table, actions=(edited,)),))
    version, files = DeltaTable(str(t)).version(), sorted(p.name for p in t.rglob("*.parquet"))
    run = apply_plan(plan, target=Target(), project=Project(name="p", root=tmp_path))
    [result] = run.results
    assert result.status == "verification_failed", result.error
    assert "would drop other rows than planned" in (result.error or "")
    assert DeltaTable(str(t)).version() == version
    assert sorted(p.name for p in t.rglob("*.parquet")) == files


def test_a_purge_and_a_compaction_of_one_partition_commit_apart(tmp_path: Path) -> None:
    """At min_deleted_ratio 0.005 the purges take partitions 0, 3, 6 and 7 (their files with a vector; the
    small file beside one in 3, 6 and 7 is left alone: one file is no bin) and the compaction partCol=8's two
    files (its vector deletes 1 row in 201): no file in two actions, each commits its own files."""
    t = _copy("delta-misc/partitioned-table-with-dv-large", tmp_path / "t")
    before = rows(t)
    plan = purge_plan(t, ratio=0.005, compact=True)
    actions = plan.tables[0].actions
    purged = {p for a in actions if isinstance(a, PurgeAction) for p in a.input_paths}
    compacted = {p for a in actions if not isinstance(a, PurgeAction) for p in a.input_paths}
    assert sorted(a.partition["partCol"] for a in actions if isinstance(a, PurgeAction)) == ["0", "3", "6", "7"]
    assert [a.partition["partCol"] for a in actions if not isinstance(a, PurgeAction)] == ["8"]
    assert purged and compacted and not purged & compacted
    run = apply_plan(plan, target=Target(), project=Project(name="p", root=tmp_path))
    assert run.ok and all(r.status == "success" for r in run.results), [r.error for r in run.results]
    assert rows(t) == before
    assert not replay(TableLocation(str(t))).deletion_vectors.keys() & purged
    assert json.dumps([r.partition for r in run.results])


def test_a_purge_and_a_compaction_of_the_same_partition_both_commit(tmp_path: Path) -> None:
    """partCol=0: its file with a vector (purged) and two small files delta-rs appended (compacted): the plan
    runs the purge first, then the compaction, each committing its own files; every row stays once."""
    import pyarrow as pa
    from deltalake import write_deltalake

    t = _copy("delta-misc/partitioned-table-with-dv-large", tmp_path / "t")
    for i in range(2):
        write_deltalake(str(t), pa.table({"id": pa.array([10**6 + i], pa.int32()), "partCol": pa.array([0], pa.int32())}),
                        mode="append", partition_by=["partCol"])
    before = rows(t)
    plan = purge_plan(t, ratio=0.014, compact=True)
    mine = [a for a in plan.tables[0].actions if a.partition == {"partCol": "0"}]
    assert [a.type for a in mine] == ["purge", "compact"]
    assert not set(mine[0].input_paths) & set(mine[1].input_paths) and len(mine[1].input_paths) == 2
    run = apply_plan(plan, target=Target(), project=Project(name="p", root=tmp_path))
    assert run.ok and all(r.status == "success" for r in run.results), [r.error for r in run.results]
    assert rows(t) == before
    live = {p for p, _ in replay(TableLocation(str(t))).live}
    assert not live & {p for a in mine for p in a.input_paths}
    assert len([p for p in live if p.startswith("partCol=0/")]) == 2
