"""Issue 40's acceptance matrix: tables delta-spark wrote with deletion vectors and the change feed on, where a
DELETE, an UPDATE and a MERGE left one partition 1% soft-deleted, one 10% and one 90% (of the rows its first
files hold), partitioned by an int and a date (both: each predicate, each value's spelling in paths and in
the log, in one table), with and without column mapping (a renamed column and a name with spaces), taken by
every engine path (``PATHS``: one line each): the local engine's compaction and
purge, the spark engine's rewrite, its OPTIMIZE and its purge (REORG ... APPLY (PURGE)).

On every path: the plan is what the path does today (a path that cannot take the table yet shows its skip and
reason in the plan, asserted as such, so this test fails when that changes); apply succeeds; delta-spark reads
the same multiset of rows; the change feed shows no row of compactor's commits; compactor's commits remove
only planned files, add none with a deletion vector and keep every row (tests/fuzz/spark_compactor.py's
checks, from the log); a purge leaves no deletion vector in the partitions it purged and leaves the 1% one
(ratio 0.05) alone; the next plan has nothing left to do. Each table is built once per module and copied per
path (a Delta table's log holds relative paths)."""

from __future__ import annotations

import json
import re
import shutil
from collections import Counter
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from compactor.engines.spark import SparkEngine
from compactor.project.model import Target
from compactor.tasks.apply import apply_plan
from tests.fuzz.spark_checks import LogReplay
from tests.fuzz.spark_compactor import PolicyChoice, check_commits, compactor_commits, feed_of, plan_with
from tests.spark_tables import live_adds

pytestmark = [pytest.mark.spark, pytest.mark.delta_jars]


@dataclass(frozen=True)
class EnginePath:
    """One way compactor takes a table: engine, method, purge or compaction. ``today``: what the plan shows
    where the path cannot take these tables yet (its skip reason and a pattern of its message); None: it runs."""

    name: str
    engine: str
    method: str
    purge: bool
    today: tuple[str, str] | None = None

    def choice(self) -> PolicyChoice:
        # a purge path purges only (ratio 0.05: the 10% and 90% partitions); a compaction path compacts only
        return PolicyChoice(purge=True, min_deleted_ratio=0.05, compaction=False) if self.purge else PolicyChoice()


PATHS = [
    EnginePath("local compaction", "local", "rewrite", purge=False),
    EnginePath("local purge", "local", "rewrite", purge=True),
    EnginePath("spark rewrite", "spark", "rewrite", purge=False),
    EnginePath("spark optimize", "spark", "optimize", purge=False),
    EnginePath("spark purge", "spark", "rewrite", purge=True),
]
#: column mapping off, on
TABLES = [False, True]
#: the share of each partition's first rows left soft-deleted, by partition index
DEAD = {0: "1%", 1: "10%", 2: "90%"}


@dataclass(frozen=True)
class Built:
    path: Path
    rows: Counter[tuple[Any, ...]]


def _build(spark: Any, path: str, mapped: bool) -> None:
    """Two appends of 300 rows (one file per partition each); then, by ``r`` = the row's place in its
    partition (0..99, twice): partition 0 loses r = 0 (1%); partition 1 r < 10 (10%: 4% deleted, 3% updated,
    3% deleted by the MERGE); partition 2 r < 90 (90%: 40% deleted, 20% updated, 20% deleted and 10% updated
    by the MERGE)."""
    price = "`unit price`" if mapped else "price"
    props = {"delta.enableDeletionVectors": "true", "delta.enableChangeDataFeed": "true"}
    if mapped:
        props["delta.columnMapping.mode"] = "name"
    spark.sql(f"CREATE TABLE delta.`{path}` (id BIGINT, part INT, day DATE, amount DOUBLE, {price} DOUBLE) "
              "USING delta PARTITIONED BY (part, day) TBLPROPERTIES ("
              + ", ".join(f"'{k}' = '{v}'" for k, v in props.items()) + ")")
    for i in range(2):
        (spark.range(i * 300, (i + 1) * 300).selectExpr("id", "CAST(id % 3 AS INT) AS part", "date_add(DATE'2024-01-01', CAST(id % 3 AS INT)) AS day",
                                                         "CAST(id AS DOUBLE) AS amount",
                                                         f"CAST(id % 7 AS DOUBLE) AS {price}")
         .repartition(1).write.format("delta").mode("append").save(path))
    if mapped:
        spark.sql(f"ALTER TABLE delta.`{path}` RENAME COLUMN amount TO total")
    amount = "total" if mapped else "amount"
    r = "((id DIV 3) % 100)"
    spark.sql(f"DELETE FROM delta.`{path}` WHERE (id % 3 = 0 AND {r} = 0) OR (id % 3 = 1 AND {r} < 4) "
              f"OR (id % 3 = 2 AND {r} < 40)")
    spark.sql(f"UPDATE delta.`{path}` SET {amount} = -1 WHERE (id % 3 = 1 AND {r} BETWEEN 4 AND 6) "
              f"OR (id % 3 = 2 AND {r} BETWEEN 40 AND 59)")
    spark.sql(f"MERGE INTO delta.`{path}` t USING (SELECT id, {r} AS r FROM range(0, 600) WHERE "
              f"(id % 3 = 1 AND {r} BETWEEN 7 AND 9) OR (id % 3 = 2 AND {r} BETWEEN 60 AND 89)) s ON t.id = s.id "
              f"WHEN MATCHED AND s.r < 80 THEN DELETE WHEN MATCHED THEN UPDATE SET t.{amount} = s.r")


def _rows(spark: Any, path: Path | str) -> Counter[tuple[Any, ...]]:
    return Counter(tuple(r) for r in spark.read.format("delta").load(str(path)).collect())


@pytest.fixture(scope="module")
def built(delta_spark: Any, tmp_path_factory: pytest.TempPathFactory) -> Iterator[dict[bool, Built]]:
    root = tmp_path_factory.mktemp("dv_acceptance")
    out = {}
    for mapped in TABLES:
        path = root / ("mapped" if mapped else "plain")
        _build(delta_spark, str(path), mapped)
        out[mapped] = Built(path, _rows(delta_spark, path))
    yield out


def _value(add: dict[str, Any]) -> int:
    """A file's partition index: its int partition value (the log names it by its physical name under column
    mapping; the date is that many days after 2024-01-01)."""
    values = set(add["partitionValues"].values())
    (k,) = [k for k in DEAD if str(k) in values]
    assert f"2024-01-0{k + 1}" in values, values
    return k


def _dv_adds(t: Path) -> dict[str, dict[str, Any]]:
    return {a["path"]: a for a in live_adds(t) if a.get("deletionVector")}


def _dead_share(path: Path) -> dict[int, float]:
    """Per partition index: the rows its deletion vectors delete / the rows of its files with one."""
    out: dict[int, list[int]] = {}
    for a in _dv_adds(path).values():
        dead = out.setdefault(_value(a), [0, 0])
        dead[0] += a["deletionVector"]["cardinality"]
        dead[1] += json.loads(a["stats"])["numRecords"]
    return {k: d / n for k, (d, n) in out.items()}


@pytest.mark.parametrize("mapped", TABLES, ids=["plain", "mapped"])
@pytest.mark.parametrize("path", PATHS, ids=[p.name.replace(" ", "-") for p in PATHS])
def test_dv_acceptance(delta_spark: Any, built: dict[bool, Built], tmp_path: Path, path: EnginePath,
                       mapped: bool) -> None:
    source = built[mapped]
    t = tmp_path / "t"
    shutil.copytree(source.path, t)
    choice = path.choice()
    plan = plan_with(choice, t, path.engine, path.method)
    (tp,) = plan.tables
    with_dv = {p: _value(a) for p, a in _dv_adds(t).items()}
    planned = {p for a in tp.actions for p in a.input_paths}
    if path.today is not None:
        reason, pattern = path.today
        said = [s for s in tp.skipped if s.reason == reason and re.search(pattern, s.message)]
        assert said, f"{path.name}: the plan no longer shows {reason} ({pattern}): {[(s.reason, s.message) for s in tp.skipped]}"
        assert not planned & with_dv.keys(), f"{path.name}: files with deletion vectors planned, yet {reason} is shown"
    elif path.purge:
        purged = sorted(a.partition["part"] for a in tp.actions)
        assert {a.type for a in tp.actions} == {"purge"} and purged == ["1", "2"], \
            [(a.type, a.partition) for a in tp.actions]
        below = [s.partition for s in tp.skipped if s.reason == "below_purge_threshold"]
        assert below == [{"part": "0", "day": "2024-01-01"}], tp.skipped
        # REORG's files: those with a deletion vector, and those holding a column the table lacks (the change
        # feed's `_change_type` that delta-spark's UPDATE writes into its data files), each saying which
        assert planned & with_dv.keys() == {p for p, k in with_dv.items() if k != 0}
        extra = {p: cols for a in tp.actions for p, dv, cols in zip(a.input_paths, a.deletion_vectors,
                                                                    a.extra_columns or ("",) * a.input_files) if not dv}
        assert extra.keys() == planned - with_dv.keys() and all(extra.values()), extra
    else:
        assert tp.actions and planned & with_dv.keys(), [(s.reason, s.message) for s in tp.skipped]
    if path.purge and path.today is not None:
        over = sorted((s.partition or {}).get("part") for s in tp.skipped if s.reason == path.today[0])
        assert over == ["1", "2"], over

    v0 = LogReplay(t).update().version
    target = Target(engine=path.engine)  # type: ignore[arg-type]
    run = apply_plan(plan, target=target, watch_s=0, engine=SparkEngine(target) if path.engine == "spark" else None)
    assert all(r.status == "success" for r in run.results), [(r.type, r.status, r.error) for r in run.results]
    assert _rows(delta_spark, t) == source.rows
    replay = LogReplay(t).update()
    check_commits(replay, v0, plan, run)  # only planned files leave, no deletion vector added, rows kept
    ours = sorted(compactor_commits(replay, v0))
    assert len(ours) >= (1 if tp.actions else 0) and replay.version == v0 + len(ours)
    assert feed_of(delta_spark, str(t), ours) == 0, "the change feed shows compactor's rows"
    if path.purge and path.today is None:
        left = {_value(a) for a in _dv_adds(t).values()}
        assert left == {0}, f"deletion vectors left in partitions {left}"
    again = plan_with(choice, t, path.engine, path.method)
    assert not again.tables[0].actions, [(a.type, a.partition) for a in again.tables[0].actions]


def test_the_tables_hold_the_dead_shares_they_are_named_by(built: dict[bool, Built]) -> None:
    """Partition 0's files are 1% soft-deleted, 1's 10%, 2's 90% (of the rows the files with a deletion vector
    hold), in every table."""
    for b in built.values():
        shares = _dead_share(b.path)
        assert {k: round(v, 2) for k, v in shares.items()} == {0: 0.01, 1: 0.1, 2: 0.9}, (b.path, shares)
