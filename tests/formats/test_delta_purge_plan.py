"""Soft-deleted rows in Delta plans, without a JVM: each file's deletion vector read from the log (id and
cardinality), deleted rows per partition, the ``purge`` action by the policy's thresholds, and the
``max_deleted_rows_ratio`` trigger in OPTIMIZE's bin model. On deletion-vector tables written by delta-spark
and Databricks (the shared fixture corpus; skipped without it)."""

from __future__ import annotations

import datetime as dt
import json
from dataclasses import replace
from pathlib import Path

import pyarrow as pa
import pytest
from deltalake import DeltaTable

from compactor.errors import StalePlanError
from compactor.formats.delta.plan.planner import plan_delta_table
from compactor.formats.delta.plan.purge_action import PurgeAction, PurgeSkipReason
from compactor.formats.delta.read.facts import delta_facts
from compactor.formats.delta.read.state import read_delta_state
from compactor.models.state import TableState
from compactor.models.table import TableLocation
from compactor.planning.actions import CompactAction, action_from_dict, action_to_dict
from compactor.planning.integrity import action_problems
from compactor.policy.model import Compaction, Purge, TablePolicy, Triggers

NOW = dt.datetime(2026, 11, 28, tzinfo=dt.UTC)
#: partCol -> rows its deletion vectors delete (partitioned-table-with-dv-large, from its log's descriptors)
LARGE_DELETED = {"0": 4, "3": 2, "5": 1, "6": 2, "7": 3, "8": 1, "9": 1}


def _state(fixtures_dir: Path, rel: str) -> TableState:
    return read_delta_state(TableLocation(str(fixtures_dir / rel)))


def _policy(path: str, *, purge: Purge | None = None, min_file_size: int = 1, ratio: float | None = None,
            enabled: bool = True) -> TablePolicy:
    c = Compaction(enabled=enabled, min_file_size=min_file_size, triggers=Triggers(min_input_files=2,
                                                                                  max_deleted_rows_ratio=ratio),
                   purge=purge or Purge())
    return TablePolicy(name="t", path=path, compaction=c)


def _logged_cardinalities(table: Path) -> dict[str, int]:
    """The test's own reading of the JSON commits (no checkpoint in these tables): live adds' cardinalities."""
    live: dict[str, int] = {}
    for commit in sorted((table / "_delta_log").glob("*.json")):
        for line in commit.read_text().splitlines():
            obj = json.loads(line) if line.strip() else {}
            if "remove" in obj:
                live.pop(obj["remove"]["path"], None)
            if "add" in obj:
                live[obj["add"]["path"]] = int((obj["add"].get("deletionVector") or {}).get("cardinality") or 0)
    return {p: n for p, n in live.items() if n}


@pytest.mark.parametrize("rel", ["delta-rs/cdf-table-with-cdc-and-dvs", "delta-rs/table-with-dv-small"])
def test_deleted_rows_from_the_log_are_what_delta_rs_materialises(fixtures_dir: Path, rel: str) -> None:
    state = _state(fixtures_dir, rel)
    vectors = delta_facts(state).deletion_vectors
    assert vectors
    bitmaps = pa.table(DeltaTable(str(fixtures_dir / rel)).deletion_vectors())
    counted = {loc.rsplit("/", 1)[-1]: sum(1 for keep in sel if not keep)
               for loc, sel in zip(bitmaps.column("filepath").to_pylist(), bitmaps.column("selection_vector").to_pylist())}
    assert {p: v.cardinality for p, v in vectors.items()} == counted
    assert all(v.id.startswith(("u", "p", "i")) for v in vectors.values())


def test_deleted_rows_per_partition_on_a_table_delta_rs_cannot_read(fixtures_dir: Path) -> None:
    """Its deletion vectors are stored under a random prefix: delta-rs cannot open them, the log still says."""
    rel = "delta-misc/partitioned-table-with-dv-large"
    state = _state(fixtures_dir, rel)
    facts = delta_facts(state)
    assert dict(facts.deleted_rows or {}) == _logged_cardinalities(fixtures_dir / rel)
    plan = plan_delta_table(_policy(state.uri, purge=Purge(enabled=True)), state, now=NOW, engine="spark")
    below = {s.partition["partCol"]: s.details for s in plan.skipped
             if s.reason == PurgeSkipReason.BELOW_PURGE_THRESHOLD and s.partition}
    assert {k: d["deleted_rows"] for k, d in below.items()} == LARGE_DELETED
    assert below["0"]["deleted_ratio"] == 0.02 and 0 < below["0"]["dead_bytes_ratio"] < 0.02  # type: ignore[operator]
    assert not [a for a in plan.actions if isinstance(a, PurgeAction)]


def test_a_file_mostly_dead_above_min_file_size_is_purged(fixtures_dir: Path) -> None:
    """cdf-table-with-cdc-and-dvs: one file of 8 rows, 6 deleted (75% dead), and min_file_size 1 byte: every
    file is large, no compaction; the purge lists the file with its deletion vector, alone in its bin."""
    state = _state(fixtures_dir, "delta-rs/cdf-table-with-cdc-and-dvs")
    policy = _policy(state.uri, purge=Purge(enabled=True, min_deleted_ratio=0.05))
    plan = plan_delta_table(policy, state, now=NOW, engine="spark")
    (purge,) = [a for a in plan.actions if isinstance(a, PurgeAction)]
    vectors = delta_facts(state).deletion_vectors or {}
    (path,) = vectors
    assert purge.bins == ((path,),) and purge.deletion_vectors == (vectors[path].id,)
    assert purge.cardinalities == (6,) and purge.deleted_rows == 6 and purge.rows == 2 and purge.partition_rows == 11
    assert purge.input_files == 1 and purge.expected_output_files == 1
    assert 0 < purge.reclaimed_bytes < purge.input_bytes and purge.precondition.table_version == state.version
    assert not [a for a in plan.actions if isinstance(a, CompactAction)]
    assert action_problems(purge, policy, plan) == []
    again = action_from_dict(PurgeAction, json.loads(json.dumps(action_to_dict(purge))))
    assert again == purge
    # the same table under thresholds it does not pass: nothing planned, the deleted rows named
    for strict in (Purge(enabled=True, min_deleted_ratio=0.6), Purge(enabled=True, min_deleted_ratio=1.0,
                                                                    min_deleted_rows=6)):
        plan = plan_delta_table(_policy(state.uri, purge=strict), state, now=NOW, engine="spark")
        assert not [a for a in plan.actions if isinstance(a, PurgeAction)]
        (skip,) = [s for s in plan.skipped if s.reason == PurgeSkipReason.BELOW_PURGE_THRESHOLD]
        assert skip.details["deleted_rows"] == 6
    edited = replace(purge, min_deleted_ratio=0.5)
    assert "min_deleted_ratio 0.5 is not the policy's 0.05" in action_problems(edited, policy, plan)


def test_a_file_one_percent_dead_is_not_purged_at_ratio_0_05(fixtures_dir: Path) -> None:
    """partitioned-table-with-dv-large: partCol=3 holds 2 deleted rows in 201 (1%); partCol=0 4 in 200 (2%)."""
    state = _state(fixtures_dir, "delta-misc/partitioned-table-with-dv-large")

    def purged(p: Purge) -> set[str | None]:
        plan = plan_delta_table(_policy(state.uri, purge=p), state, now=NOW, engine="spark")
        return {a.partition["partCol"] for a in plan.actions if isinstance(a, PurgeAction)}

    assert purged(Purge(enabled=True, min_deleted_ratio=0.05)) == set()
    assert purged(Purge(enabled=True, min_deleted_ratio=0.015)) == {"0"}
    assert purged(Purge(enabled=True, min_deleted_ratio=1.0, min_deleted_rows=2)) == {"0", "7"}
    assert purged(Purge(enabled=True, min_deleted_ratio=0.0)) == set(LARGE_DELETED)
    assert purged(Purge(enabled=False, min_deleted_ratio=0.0)) == set()


def test_the_local_engine_plans_the_purge(fixtures_dir: Path) -> None:
    state = _state(fixtures_dir, "delta-rs/cdf-table-with-cdc-and-dvs")
    plan = plan_delta_table(_policy(state.uri, purge=Purge(enabled=True)), state, now=NOW, engine="local")
    (purge,) = [a for a in plan.actions if isinstance(a, PurgeAction)]
    assert purge.deleted_rows == 6 and not purge.extra_columns
    assert not [s for s in plan.skipped if s.reason == PurgeSkipReason.PURGE_NEEDS_SPARK]


def _with_extra_columns(state: TableState, columns: tuple[str, ...]) -> tuple[TableState, str]:
    """``state`` as if its one file without a deletion vector in partCol=7 held ``columns`` the table lacks."""
    facts = delta_facts(state)
    deleted = facts.deleted_rows or {}
    bare = sorted(p for p in state.files.column("path").to_pylist() if "partCol=7/" in p and p not in deleted)
    assert len(bare) == 1
    return replace(state, extra=replace(facts, extra_columns={bare[0]: columns})), bare[0]


def test_the_purge_lists_the_files_reorg_rewrites_for_their_extra_columns(fixtures_dir: Path) -> None:
    """REORG ... APPLY (PURGE) also rewrites files holding columns the table lacks (DeltaPurgeOperation): the
    plan lists them, in REORG's bins by size, without a deletion vector and with the columns, and their rows
    count in the purge's rows."""
    state, bare = _with_extra_columns(_state(fixtures_dir, "delta-misc/partitioned-table-with-dv-large"),
                                      ("_change_type", "__is_cdc"))
    policy = _policy(state.uri, purge=Purge(enabled=True, min_deleted_ratio=0.014))
    for engine in ("spark", "local"):
        plan = plan_delta_table(policy, state, now=NOW, engine=engine)
        (purge,) = [a for a in plan.actions if isinstance(a, PurgeAction) and a.partition == {"partCol": "7"}]
        assert bare in purge.input_paths and purge.input_files == 2 and purge.expected_output_files == 1
        at = purge.input_paths.index(bare)
        assert (purge.deletion_vectors[at], purge.cardinalities[at], purge.extra_columns[at]) == \
            ("", 0, "_change_type, __is_cdc")
        assert purge.rows == 200 + 1 - 3  # the partition's two files less the 3 rows its vector deletes
        assert action_problems(purge, policy, plan) == []
        assert "holding column(s) the table lacks (__is_cdc, _change_type)" in purge.reason
        assert not [a for a in plan.actions if isinstance(a, CompactAction) and bare in a.input_paths]
        purge.check_deletion_vectors({p: v.id for p, v in (delta_facts(state).deletion_vectors or {}).items()})
        assert action_from_dict(PurgeAction, json.loads(json.dumps(action_to_dict(purge)))) == purge


def test_a_dropped_column_keeps_the_local_engine_from_purging_the_partition(fixtures_dir: Path) -> None:
    """A column dropped under column mapping stays in older files; REORG rewrites them without it, the local
    engine's rewrite leaves out only the change data feed's columns: the partition is skipped, naming it."""
    state, bare = _with_extra_columns(_state(fixtures_dir, "delta-misc/partitioned-table-with-dv-large"),
                                      ("col-5f1a",))
    policy = _policy(state.uri, purge=Purge(enabled=True, min_deleted_ratio=0.014))
    local = plan_delta_table(policy, state, now=NOW, engine="local")
    assert [a.partition for a in local.actions if isinstance(a, PurgeAction)] == [{"partCol": "0"}]
    (skip,) = [s for s in local.skipped if s.reason == PurgeSkipReason.PURGE_NEEDS_SPARK]
    assert skip.partition == {"partCol": "7"} and bare in skip.message and "col-5f1a" in skip.message
    spark = plan_delta_table(policy, state, now=NOW, engine="spark")
    (purge,) = [a for a in spark.actions if isinstance(a, PurgeAction) and a.partition == {"partCol": "7"}]
    assert purge.extra_columns[purge.input_paths.index(bare)] == "col-5f1a"


def test_a_deletion_vector_changed_since_planning_makes_the_purge_stale(fixtures_dir: Path) -> None:
    state = _state(fixtures_dir, "delta-rs/cdf-table-with-cdc-and-dvs")
    plan = plan_delta_table(_policy(state.uri, purge=Purge(enabled=True)), state, now=NOW, engine="spark")
    (purge,) = [a for a in plan.actions if isinstance(a, PurgeAction)]
    vectors = delta_facts(state).deletion_vectors or {}
    purge.check_deletion_vectors({p: v.id for p, v in vectors.items()})
    (path,) = vectors
    with pytest.raises(StalePlanError, match="different deletion vector"):
        purge.check_deletion_vectors({path: vectors[path].id + "x"})
    with pytest.raises(StalePlanError, match="different deletion vector"):
        purge.check_deletion_vectors({})


def test_max_deleted_rows_ratio_makes_a_dv_file_an_optimize_candidate(fixtures_dir: Path) -> None:
    """min_file_size 1000 bytes: the 585-byte files are small, the 1399-byte files with deletion vectors are
    not; at the policy's ratio they join the bins delta-spark's OPTIMIZE packs (more than the ratio deleted)."""
    state = _state(fixtures_dir, "delta-misc/partitioned-table-with-dv-large")
    dv = set(delta_facts(state).deleted_rows or ())

    def binned(ratio: float | None) -> set[str]:
        plan = plan_delta_table(_policy(state.uri, min_file_size=1000, ratio=ratio), state, now=NOW, engine="spark")
        return {p for a in plan.actions if isinstance(a, CompactAction) for p in a.input_paths}

    assert not binned(None) & dv  # default 0.05: no file here is 5% deleted
    low = binned(0.0001)
    assert low & dv and low - dv


def test_the_purge_and_optimize_sql_are_data() -> None:
    from compactor.formats.delta.spark_sql import optimize_conf, reorg_purge_sql

    assert reorg_purge_sql("/lake/t", {"bucket": "0", "d": None}) == \
        "REORG TABLE delta.`/lake/t` WHERE `bucket` = '0' AND `d` IS NULL APPLY (PURGE)"
    assert reorg_purge_sql("/lake/t", {}) == "REORG TABLE delta.`/lake/t` APPLY (PURGE)"
    assert optimize_conf(100, 50)["spark.databricks.delta.optimize.maxDeletedRowsRatio"] == "0.05"
    assert optimize_conf(100, 50, 0.2)["spark.databricks.delta.optimize.maxDeletedRowsRatio"] == "0.2"


def test_the_policy_ratio_travels_with_the_compaction(fixtures_dir: Path) -> None:
    """The native OPTIMIZE runs with the ratio the plan chose its candidates with (apply/native.py)."""
    state = _state(fixtures_dir, "delta-misc/partitioned-table-with-dv-large")
    policy = _policy(state.uri, min_file_size=1000, ratio=0.0001)
    plan = plan_delta_table(policy, state, now=NOW, engine="spark")
    compacts = [a for a in plan.actions if isinstance(a, CompactAction)]
    assert compacts and {a.max_deleted_rows_ratio for a in compacts} == {0.0001}
    assert action_problems(compacts[0], policy, plan) == []
    assert "max_deleted_rows_ratio 0.0001 is not the policy's 0.2" in action_problems(
        compacts[0], _policy(state.uri, min_file_size=1000, ratio=0.2), plan)


def test_inspect_and_report_show_soft_deleted_rows_per_partition(fixtures_dir: Path, tmp_path: Path) -> None:
    import re

    from click.testing import CliRunner

    from compactor.cli.inspect import command as inspect_command
    from compactor.cli.report import command as report_command

    table = fixtures_dir / "delta-misc" / "partitioned-table-with-dv-large"
    r = CliRunner().invoke(inspect_command, [str(table), "--format", "json"])
    assert r.exit_code == 0, r.output
    report = json.loads(r.output)
    assert report["deleted_rows"] == sum(LARGE_DELETED.values())
    assert {p["partition"].removeprefix("partCol="): p["deleted_rows"] for p in report["partitions"]
            if p["deleted_rows"]} == LARGE_DELETED
    assert next(p for p in report["partitions"] if p["partition"] == "partCol=0")["rows"] == 200
    r = CliRunner().invoke(inspect_command, [str(table)])
    assert r.exit_code == 0, r.output
    assert "soft-deleted rows: 14" in r.output and "partCol=0: 1 file(s), 1.4 KiB, 4 soft-deleted row(s) (2.0% of its rows)" \
        in r.output

    proj = tmp_path / "proj"
    (proj / "policies").mkdir(parents=True)
    (proj / "compactor.yml").write_text("name: p\n")
    (proj / "policies" / "t.yml").write_text(f"version: 1\ntables:\n  - name: t\n    path: {table}\n")
    out = tmp_path / "r.html"
    r = CliRunner().invoke(report_command, ["--project-dir", str(proj), "--out", str(out)])
    assert r.exit_code == 0, r.output
    page = out.read_text()
    tile = re.search(r'data-tile="soft-deleted rows">.*?class="v">([^<]+)<', page, re.S)
    assert tile is not None and tile.group(1) == "14"
    assert "<b>14</b> soft-deleted rows in 7 partition(s) (most in partCol=0: 4)" in page


def test_a_file_the_purge_rewrites_is_no_input_of_the_compaction_beside_it(fixtures_dir: Path) -> None:
    """partCol=3's file with a deletion vector (1% dead) is an OPTIMIZE candidate at ratio 0.0001, binned with
    the partition's small file; purged at min_deleted_ratio 0.005, the purge takes it and the compaction
    leaves it (no file in two actions)."""
    state = _state(fixtures_dir, "delta-misc/partitioned-table-with-dv-large")
    policy = _policy(state.uri, min_file_size=1000, ratio=0.0001)

    def inputs(p: TablePolicy) -> tuple[set[str], set[str]]:
        plan = plan_delta_table(p, state, now=NOW, engine="spark")
        return ({x for a in plan.actions if isinstance(a, PurgeAction) for x in a.input_paths if "partCol=3/" in x},
                {x for a in plan.actions if isinstance(a, CompactAction) for x in a.input_paths if "partCol=3/" in x})

    purged, compacted = inputs(policy)
    assert not purged and len(compacted) == 2
    dv_file = set(delta_facts(state).deleted_rows or ()) & compacted
    assert len(dv_file) == 1
    purged, compacted = inputs(replace(policy, compaction=replace(policy.compaction, purge=Purge(
        enabled=True, min_deleted_ratio=0.005))))
    assert purged == dv_file and not compacted
