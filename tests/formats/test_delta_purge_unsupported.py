"""A table the spark engine's rewrite method cannot compact (column mapping: the rewrite is not proved there)
still gets its purge: delta-spark's REORG TABLE ... APPLY (PURGE) purges whatever the table's features and
the compaction method; only the compaction is skipped as unsupported (found by
tests/interop/test_dv_acceptance.py's spark purge of a column-mapped table). On delta-spark's golden
dv-with-columnmapping table (the shared fixture corpus; skipped without it)."""

from __future__ import annotations

import datetime as dt
from pathlib import Path

from compactor.formats.delta.plan.planner import plan_delta_table
from compactor.formats.delta.plan.purge_action import PurgeAction
from compactor.formats.delta.read.state import read_delta_state
from compactor.models.table import TableLocation
from compactor.planning.skips import SkipReason
from compactor.policy.model import Compaction, Purge, TablePolicy, Triggers

NOW = dt.datetime(2026, 11, 28, tzinfo=dt.UTC)


def _plan(path: str, purge: Purge, engine: str) -> tuple[list[PurgeAction], list[str]]:
    state = read_delta_state(TableLocation(path))
    policy = TablePolicy(name="t", path=path, compaction=Compaction(
        method="rewrite", min_file_size=1, triggers=Triggers(min_input_files=2), purge=purge))
    plan = plan_delta_table(policy, state, now=NOW, engine=engine)
    return [a for a in plan.actions if isinstance(a, PurgeAction)], \
        [s.message for s in plan.skipped if s.reason == SkipReason.UNSUPPORTED]


def test_a_column_mapped_table_is_purged_by_the_spark_engine_whatever_the_method(fixtures_dir: Path) -> None:
    path = str(fixtures_dir / "delta-golden" / "dv-with-columnmapping")
    purges, unsupported = _plan(path, Purge(enabled=True, min_deleted_ratio=0.0), "spark")
    assert sorted(a.partition["part"] for a in purges) == ["6", "8"]
    assert all(a.deletion_vectors and a.cardinalities for a in purges)
    assert unsupported == ["table uses columnMapping: its data files cannot be rewritten safely by compactor"]
    # purge off: the table is skipped as before, naming the feature
    purges, unsupported = _plan(path, Purge(), "spark")
    assert not purges and unsupported == ["table uses columnMapping: its data files cannot be rewritten safely by compactor"]
