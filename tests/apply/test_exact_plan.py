"""Apply runs exactly the reviewed plan, on both engines: exactly the planned inputs, one output per bin,
every partition value type, tables without statistics, and a second plan that has nothing to do."""

from __future__ import annotations

import datetime as dt
import decimal
import json
import random
import time
from collections import Counter
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from click.testing import CliRunner
from deltalake import DeltaTable, write_deltalake
from deltalake.transaction import AddAction

from compactor.cli import cli
from compactor.formats.delta.read.state import read_delta_state
from compactor.models.table import TableLocation
from compactor.project.model import Target
from compactor.tasks.apply import apply_plan
from tests.apply.helpers import exactly_once, ids, make_table, one_table_project, plan_for

ENGINES = ["local", pytest.param("spark", marks=pytest.mark.spark)]


def _live(t: Path) -> set[str]:
    return set(read_delta_state(TableLocation(str(t))).paths)


@pytest.mark.parametrize("engine", ENGINES)
def test_exactly_the_planned_inputs_are_replaced_and_appends_are_untouched(tmp_path: Path, engine: str,
                                                                          request: pytest.FixtureRequest) -> None:
    if engine == "spark":
        request.getfixturevalue("spark")
    t = tmp_path / "t"
    n = make_table(t, partitions=2, appends=6)
    plan = plan_for(t, engine=engine)
    planned = {p for a in plan.tables[0].actions for p in a.input_paths}
    before = _live(t)
    n2 = make_table(t, partitions=2, appends=2, start=n)  # appended to the planned partitions after planning
    appended = _live(t) - before
    run = apply_plan(plan, target=Target(engine=engine))
    assert run.ok, [r.error for r in run.results]
    after = _live(t)
    assert not (planned & after), "a planned input is still live"
    assert appended <= after, "a file appended after planning was rewritten"
    assert before - planned <= after
    outputs = after - before - appended
    assert len(outputs) == sum(a.expected_output_files for a in plan.tables[0].actions)
    for r, a in zip(run.results, plan.tables[0].actions):
        assert r.files_removed == a.input_files and r.files_added == a.expected_output_files
    exactly_once(t, n2)


def _typed_table(t: Path) -> int:
    """Partitioned by every kind of Delta partition type, with string values that need escaping."""
    strings = ["a b", "x/y", "k=v", "100%", "é€", None, ""]
    n = 0
    for _ in range(3):
        k = len(strings)
        write_deltalake(str(t), pa.table({
            "s": pa.array(strings, pa.string()),
            # the null and the "" row share every other value: they are one partition
            "i": pa.array([1, 2, None, 4, 5, 7, 7], pa.int32()),
            "d": pa.array([dt.date(2024, 1, 1)] * 4 + [None] + [dt.date(2024, 1, 2)] * 2),
            "b": pa.array([True, False, None, True, True, False, False]),
            "ts": pa.array([dt.datetime(2024, 1, 1, 12, 0, 0, 123456)] * k, pa.timestamp("us", tz="UTC")),
            "dec": pa.array([decimal.Decimal("1.50")] * k, pa.decimal128(5, 2)),
            "id": pa.array(range(n, n + k), pa.int64()),
        }), partition_by=["s", "i", "d", "b", "ts", "dec"], mode="append")
        n += k
    return n


@pytest.mark.parametrize("engine", ENGINES)
def test_every_partition_value_type_and_encoding(tmp_path: Path, engine: str, request: pytest.FixtureRequest) -> None:
    if engine == "spark":
        request.getfixturevalue("spark")
    t = tmp_path / "t"
    n = _typed_table(t)
    values_before = Counter(tuple(sorted(r.items())) for r in _partition_values(t))
    plan = plan_for(t, engine=engine)
    # "" and null are one partition (the Delta protocol: an empty string partition value is null)
    assert len(plan.tables[0].actions) == 6
    run = apply_plan(plan, target=Target(engine=engine))
    assert run.ok, [r.error for r in run.results]
    exactly_once(t, n)
    assert read_delta_state(TableLocation(str(t))).file_count == 6
    # the same typed values, read back by delta-rs from the new files' partitionValues
    values_after = Counter(tuple(sorted(r.items())) for r in _partition_values(t))
    assert set(values_after) == set(values_before)
    next_plan = plan_for(t, engine=engine)
    assert not next_plan.tables[0].actions


def _partition_values(t: Path) -> list[dict]:
    f = pa.table(DeltaTable(str(t)).get_add_actions(flatten=True))
    return f.select([c for c in f.column_names if c.startswith("partition.")]).to_pylist()


def _table_without_stats(t: Path, files: int = 6) -> int:
    """Files committed with no statistics at all (as writers with stats collection off do)."""
    write_deltalake(str(t), pa.table({"date": ["2024-01-01"], "id": pa.array([0], pa.int64())}), partition_by=["date"])
    dt_ = DeltaTable(str(t))
    n = 1
    actions = []
    for i in range(files):
        rel = f"date=2024-01-01/part-nostats-{i}.parquet"
        pq.write_table(pa.table({"id": pa.array(range(n, n + 10), pa.int64())}), t / rel)
        n += 10
        actions.append(AddAction(rel, (t / rel).stat().st_size, {"date": "2024-01-01"}, int(time.time() * 1000), True,
                                 None))
    dt_.create_write_transaction(actions, mode="append", schema=dt_.schema(), partition_by=["date"])
    return n


@pytest.mark.parametrize("engine", ENGINES)
def test_table_without_statistics_is_verified_from_footers(tmp_path: Path, engine: str,
                                                           request: pytest.FixtureRequest) -> None:
    if engine == "spark":
        request.getfixturevalue("spark")
    t = tmp_path / "t"
    n = _table_without_stats(t)
    state = read_delta_state(TableLocation(str(t)))
    assert state.files.column("num_records").null_count == 6
    plan = plan_for(t, engine=engine)
    assert plan.tables[0].actions[0].rows is None  # unknown from the log
    (r,) = apply_plan(plan, target=Target(engine=engine)).results
    assert r.status == "success", r.error
    assert r.rows_before == r.rows_after == n
    exactly_once(t, n)


def _random_table(t: Path, rng: random.Random) -> None:
    n = 0
    for _ in range(rng.randint(3, 25)):
        rows = rng.choice([5, 200, 2000, 20000, 60000, 150000])
        part = rng.randint(1, rng.randint(1, 4))
        write_deltalake(str(t), pa.table({"p": [f"v{part}"] * rows, "id": pa.array(range(n, n + rows), pa.int64()),
                                          "x": pa.array([rng.random() for _ in range(rows)])}),
                        partition_by=["p"], mode="append")
        n += rows


def test_plan_apply_plan_converges_on_random_tables(tmp_path: Path) -> None:
    """plan -> apply -> plan --detailed-exitcode exits 0 (no changes) on 10 random tables."""
    rng = random.Random(20261123)
    runner = CliRunner()
    changed = 0
    for k in range(10):
        t = tmp_path / f"t{k}"
        _random_table(t, rng)
        target = rng.choice(["1MiB", "2MiB", "4MiB"])
        p = one_table_project(tmp_path / f"p{k}", t, f"{{target_file_size: {target}, triggers: {{min_input_files: 2}}}}")
        rows = sum(ids(t).values())
        first = runner.invoke(cli, ["plan", "--project-dir", str(p), "--detailed-exitcode", "--format", "json"],
                              catch_exceptions=False)
        assert first.exit_code in (0, 2), first.output
        changed += first.exit_code == 2
        applied = runner.invoke(cli, ["apply", str(p / "target" / "plan.json"), "--project-dir", str(p)],
                                catch_exceptions=False)
        assert applied.exit_code == 0, applied.output
        again = runner.invoke(cli, ["plan", "--project-dir", str(p), "--detailed-exitcode", "--format", "json"],
                              catch_exceptions=False)
        doc = json.loads(again.output)
        assert again.exit_code == 0, (k, target, [(a["partition"], a["input_files"]) for tp in doc["tables"]
                                                  for a in tp["actions"]])
        assert sum(ids(t).values()) == rows and max(ids(t).values()) == 1
    assert changed >= 8  # the random tables did need compacting


def test_files_whose_log_path_delta_rs_would_spell_otherwise_are_removed_as_the_log_spells_them(tmp_path: Path) -> None:
    """Spark writes non-ASCII characters raw into the log (delta-rs encodes them): a remove spelled as
    delta-rs spells it would match nothing and duplicate the file's rows. compactor's own commit spells each
    remove as the log spelled its add, so those files compact like the others, every row once."""
    t = tmp_path / "t"
    n = make_table(t, partitions=1, appends=3)  # date=2024-01-01, ordinary paths
    (t / "date=é").mkdir()
    lines = []
    for i in range(3):
        rel = f"date=é/part-spark-{i}.parquet"
        pq.write_table(pa.table({"id": pa.array(range(n, n + 5), pa.int64())}), t / rel)
        n += 5
        lines.append(json.dumps({"add": {"path": rel, "partitionValues": {"date": "é"}, "size": (t / rel).stat().st_size,
                                         "modificationTime": int(time.time() * 1000), "dataChange": True,
                                         "stats": json.dumps({"numRecords": 5})}}, ensure_ascii=False))
    version = DeltaTable(str(t)).version() + 1
    (t / "_delta_log" / f"{version:020d}.json").write_text("\n".join(lines) + "\n", encoding="utf-8")
    plan = plan_for(t)
    table = plan.tables[0]
    assert sorted(a.partition["date"] for a in table.actions) == ["2024-01-01", "é"]
    run = apply_plan(plan, target=Target())
    assert run.ok, [r.error for r in run.results]
    removes = [json.loads(line)["remove"]["path"] for f in sorted((t / "_delta_log").glob("*.json"))
               for line in f.read_text(encoding="utf-8").splitlines() if '"remove"' in line]
    assert {f"date=é/part-spark-{i}.parquet" for i in range(3)} <= set(removes)
    exactly_once(t, n)
