"""The local engine purges soft-deleted rows (no Spark in the rewrite or the commit) of tables delta-spark
wrote with deletion vectors and the change data feed, after DELETE, UPDATE and MERGE, partitioned by int and
by date, with and without column mapping: delta-spark reads the same multiset of rows afterwards, the change
data feed shows no row of the purge, no purged file stays live and no live file of a purged partition keeps a
vector, the removes carry the planned descriptors, the commit is recorded as delta-spark records its REORG,
and `compactor plan --detailed-exitcode` exits 0 afterwards. delta-spark's UPDATE writes `_change_type` and
`__is_cdc` into its files: REORG rewrites those too, so the plan lists them and the local purge rewrites them
without those columns. A DELETE racing the purge (after planning; once its outputs are written) leaves it
stale, every row as the DELETE left it, no output unreferenced."""

from __future__ import annotations

from collections import Counter
from pathlib import Path
from typing import Any

import pyarrow.parquet as pq
import pytest
from click.testing import CliRunner

from compactor.cli import cli
from compactor.formats.delta.plan.purge_action import PurgeAction, PurgeSkipReason
from compactor.project.model import Project, Target
from compactor.tasks.apply import apply_plan
from tests.apply.helpers import on_disk_unreferenced
from tests.apply.test_local_purge import purge_plan
from tests.engines.test_spark_purge import _dv_table
from tests.interop.test_local_dv_spark import _build
from tests.spark_tables import commit_actions, commit_versions, live_adds

pytestmark = [pytest.mark.spark, pytest.mark.delta_jars]


def _rows(spark: Any, path: str) -> Counter[Any]:
    return Counter(tuple(r) for r in spark.read.format("delta").load(path).collect())


def _replan_exit_code(root: Path, table: Path, ratio: float) -> int:
    (root / "policies").mkdir(parents=True, exist_ok=True)
    (root / "compactor.yml").write_text("name: p\n")
    (root / "policies" / "t.yml").write_text(
        f"version: 1\ntables:\n  - name: t\n    path: {table}\n    compaction: {{enabled: false, purge: "
        f"{{enabled: true, min_deleted_ratio: {ratio}}}}}\n")
    r = CliRunner().invoke(cli, ["plan", "--project-dir", str(root), "--detailed-exitcode", "--format", "json"])
    return int(r.exit_code)


@pytest.mark.parametrize(("partition", "mapped"), [("int", False), ("int", True), ("date", False), ("date", True)])
def test_the_local_purge_of_a_spark_written_table(delta_spark: Any, tmp_path: Path, partition: str,
                                                  mapped: bool) -> None:
    t = tmp_path / "t"
    path = str(t)
    _build(delta_spark, path, partition, "name" if mapped else "none")
    before = _rows(delta_spark, path)
    version = commit_versions(path)[-1]
    with_dv = {a["path"]: a["deletionVector"] for a in live_adds(path) if a.get("deletionVector")}
    plan = purge_plan(t, ratio=0.0)
    purges = [a for a in plan.tables[0].actions if isinstance(a, PurgeAction)]
    assert len(purges) == 3 and len(plan.tables[0].actions) == 3
    planned = {p for a in purges for p in a.input_paths}
    assert {p for p in planned if p in with_dv} == set(with_dv)  # (paths as logged: none needs encoding)
    extra = {p: cols for a in purges for p, cols in zip(a.input_paths, a.extra_columns or ()) if cols}
    assert extra and set(extra.values()) == {"_change_type, __is_cdc"}, extra  # the UPDATE's and MERGE's files
    run = apply_plan(plan, target=Target(), project=Project(name="p", root=tmp_path))
    assert run.ok and all(r.status == "success" for r in run.results), [r.error for r in run.results]
    assert all(r.rows_before == r.rows_after for r in run.results)
    assert _rows(delta_spark, path) == before
    live = live_adds(path)
    assert not [a for a in live if a.get("deletionVector")] and not planned & {a["path"] for a in live}
    lines = [x for v in range(version + 1, commit_versions(path)[-1] + 1) for x in commit_actions(path, v)]
    removes = {r["remove"]["path"]: r["remove"] for r in lines if "remove" in r}
    assert set(removes) == planned
    assert all(removes[p].get("deletionVector") == with_dv.get(p) for p in planned)
    for a in (x["add"] for x in lines if "add" in x):  # the change feed's columns are left out
        names = pq.read_schema(t / a["path"]).names
        assert "_change_type" not in names and "__is_cdc" not in names
    history = delta_spark.sql(f"DESCRIBE HISTORY delta.`{path}`").where(f"version > {version}").collect()
    assert {h["operation"] for h in history} == {"REORG"}
    assert all(h["operationParameters"]["applyPurge"] == "true" for h in history)
    changes = (delta_spark.read.format("delta").option("readChangeFeed", "true")
               .option("startingVersion", version + 1).load(path))
    assert changes.count() == 0, "the purge shows in the change data feed"
    assert _replan_exit_code(tmp_path / "proj", t, 0.0) == 0
    amount = "total" if mapped else "amount"  # the table goes on: delta-spark updates the purged files
    delta_spark.sql(f"UPDATE delta.`{path}` SET {amount} = 0 WHERE id % 10 = 3")
    assert sum(_rows(delta_spark, path).values()) == sum(before.values())


def test_a_file_mostly_dead_is_purged_and_one_barely_dead_is_not(delta_spark: Any, tmp_path: Path) -> None:
    """bucket 0: its two files 80% dead, large (min_file_size 1 byte: no compaction); bucket 1: 1% dead,
    below ratio 0.05. The local engine purges bucket 0 only, the UPDATE's files (holding the change feed's
    columns) with it, as delta-spark's REORG does (tests/engines/test_spark_purge.py)."""
    t = tmp_path / "t"
    p = str(t)
    _dv_table(delta_spark, p)
    before = _rows(delta_spark, p)
    plan = purge_plan(t, ratio=0.05)
    (tp,) = plan.tables
    (purge,) = [a for a in tp.actions if isinstance(a, PurgeAction)]
    assert purge.partition == {"bucket": "0"} and purge.deleted_rows == 800 and purge.input_files == 4
    assert sum(1 for c in purge.extra_columns if c) == 2
    assert [(s.partition, s.details["deleted_rows"]) for s in tp.skipped
            if s.reason == PurgeSkipReason.BELOW_PURGE_THRESHOLD] == [({"bucket": "1"}, 10)]
    run = apply_plan(plan, target=Target(), project=Project(name="p", root=tmp_path))
    assert run.ok, [(r.status, r.error) for r in run.results]
    (result,) = run.results
    assert (result.files_removed, result.files_added) == (4, purge.expected_output_files)
    assert result.rows_before == result.rows_after == purge.rows
    assert _rows(delta_spark, p) == before
    live = live_adds(t)
    assert not [a for a in live if a.get("deletionVector") and "bucket=0" in a["path"]]
    assert [a for a in live if a.get("deletionVector") and "bucket=1" in a["path"]]
    again = purge_plan(t, ratio=0.05)
    assert not again.tables[0].actions


@pytest.mark.parametrize("when", ["after planning", "once the outputs are written"])
def test_a_delete_racing_the_local_purge_leaves_it_stale(delta_spark: Any, tmp_path: Path, when: str) -> None:
    """A DELETE of more rows of a planned file (delta-spark removes it with its old vector and adds it with a
    new one): after planning, the purge is stale before anything is written (its vector is not the planned
    one); once the purge's outputs are written (crash point ``delta.outputs_written``), it is stale before
    its commit and its outputs are deleted. Every row is as the DELETE left it either way."""
    from compactor.runtime import faults

    t = tmp_path / "t"
    p = str(t)
    _dv_table(delta_spark, p)
    plan = purge_plan(t, ratio=0.05)
    delete = f"DELETE FROM delta.`{p}` WHERE bucket = 0 AND id % 20 = 8"
    expected = Counter({r: n for r, n in _rows(delta_spark, p).items() if not (r[1] == 0 and r[0] % 20 == 8)})
    fired: list[str] = []

    def hook(name: str) -> None:
        if name == "delta.outputs_written" and not fired:
            fired.append(name)
            delta_spark.sql(delete)

    if when == "after planning":
        delta_spark.sql(delete)
        previous = faults.set_hook(None)
    else:
        previous = faults.set_hook(hook)
    try:
        run = apply_plan(plan, target=Target(), project=Project(name="p", root=tmp_path))
    finally:
        faults.set_hook(previous)
    assert [r.status for r in run.results] == ["stale"], [(r.status, r.error) for r in run.results]
    assert when == "after planning" or fired
    assert _rows(delta_spark, p) == expected
    ops = [c["commitInfo"].get("operation") for v in commit_versions(p) for c in commit_actions(p, v)
           if "commitInfo" in c]
    assert "REORG" not in ops and ops[-1] == "DELETE"
    assert not on_disk_unreferenced(t), "the purge left an output no commit references"

