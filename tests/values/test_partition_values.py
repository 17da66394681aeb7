"""Partition values are copied as the log spells them (finding 8 of issue 18)."""

from __future__ import annotations

import json
from pathlib import Path

import pyarrow as pa
from deltalake import DeltaTable, write_deltalake

from compactor.formats.delta.read.log import read_commit
from compactor.models.table import TableLocation
from compactor.project.model import Target
from compactor.tasks.apply import apply_plan
from tests.apply.helpers import plan_for


def test_finding_8_partition_values_spelled_as_logged(tmp_path: Path) -> None:
    """delta-rs spells float partition values NaN and 100000000000000000000; compactor re-serialised them
    from the typed values (nan: Spark's Double.parseDouble refuses it; 1e+20), so its adds spelled the
    partition differently from every other file of it."""
    t = tmp_path / "t"
    for start in (0, 3, 6):
        write_deltalake(str(t), pa.table({"x": pa.array([float("nan"), 1e20, 0.1], pa.float64()),
                                          "id": pa.array(range(start, start + 3), pa.int64())}),
                        partition_by=["x"], mode="append")
    logged = {json.dumps(a["partitionValues"]) for a in read_commit(TableLocation(str(t)), 0).adds.values()}
    assert logged == {'{"x": "NaN"}', '{"x": "100000000000000000000"}', '{"x": "0.1"}'}
    run = apply_plan(plan_for(t), target=Target(), watch_s=0)
    assert run.ok, [(r.status, r.error) for r in run.results]
    dt = DeltaTable(str(t))
    added = set()
    for v in range(3, dt.version() + 1):
        added |= {json.dumps(a["partitionValues"]) for a in read_commit(TableLocation(str(t)), v).adds.values()}
    assert added == logged
    assert sorted(dt.to_pyarrow_table().column("id").to_pylist()) == list(range(9))
