"""A table compactor's own rewrite cannot compact (row tracking: compactor cannot keep row ids) still gets
its purge on the spark engine: delta-spark's REORG TABLE ... APPLY (PURGE) purges whatever the table's
features and the compaction method; only the compaction is skipped as unsupported (found by
tests/interop/test_dv_acceptance.py's spark purge of a column-mapped table, when the spark engine's rewrite
did not yet compact those). The local engine's purge is compactor's own rewrite: not planned there. On a copy
of delta-spark's golden dv-with-columnmapping table (the shared fixture corpus; skipped without it) whose
protocol also names rowTracking."""

from __future__ import annotations

import datetime as dt
import json
import shutil
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


def _with_row_tracking(fixtures_dir: Path, tmp_path: Path) -> str:
    """The fixture's copy, its protocol upgraded by a commit naming rowTracking too (as ALTER TABLE ... SET
    TBLPROPERTIES ('delta.enableRowTracking' = true) first does)."""
    t = tmp_path / "t"
    shutil.copytree(fixtures_dir / "delta-golden" / "dv-with-columnmapping", t)
    version = read_delta_state(TableLocation(str(t))).version + 1
    protocol = {"minReaderVersion": 3, "minWriterVersion": 7, "readerFeatures": ["deletionVectors", "columnMapping"],
                "writerFeatures": ["deletionVectors", "columnMapping", "domainMetadata", "rowTracking"]}
    (t / "_delta_log" / f"{version:020d}.json").write_text(
        json.dumps({"commitInfo": {"timestamp": 1, "operation": "UPGRADE PROTOCOL"}}) + "\n"
        + json.dumps({"protocol": protocol}) + "\n")
    return str(t)


def test_a_table_only_native_optimize_compacts_is_purged_by_the_spark_engine_whatever_the_method(
        fixtures_dir: Path, tmp_path: Path) -> None:
    path = _with_row_tracking(fixtures_dir, tmp_path)
    purges, unsupported = _plan(path, Purge(enabled=True, min_deleted_ratio=0.0), "spark")
    assert sorted(a.partition["part"] for a in purges) == ["6", "8"]
    assert all(a.deletion_vectors and a.cardinalities for a in purges)
    assert len(unsupported) == 1 and unsupported[0].startswith("rowTracking: compactor cannot preserve row ids")
    # purge off: the table is skipped as before, naming the feature
    purges, unsupported = _plan(path, Purge(), "spark")
    assert not purges and len(unsupported) == 1 and "rowTracking" in unsupported[0]
    # the local engine's purge is compactor's rewrite, which would lose the row ids: no purge, the feature named
    purges, unsupported = _plan(path, Purge(enabled=True, min_deleted_ratio=0.0), "local")
    assert not purges and len(unsupported) == 1 and "rowTracking" in unsupported[0]
