"""The plan's predicted output files per partition equal what delta-rs optimize.compact really does."""

from __future__ import annotations

import datetime as dt
import random
from pathlib import Path

import pyarrow as pa
from deltalake import DeltaTable, write_deltalake

from compactor.planning.build import build_plan
from compactor.policy.model import Compaction, TablePolicy, Triggers
from compactor.project.model import Target
from compactor.state.delta import read_delta_state


def _write_table(path: Path, seed: int) -> None:
    rng = random.Random(seed)
    for i in range(60):
        part = f"p{rng.randrange(4)}"
        n = rng.choice([20, 200, 2000, 8000])
        write_deltalake(str(path), pa.table({"part": [part] * n, "x": [rng.random() for _ in range(n)]}),
                        partition_by=["part"], mode="append")


def test_predicted_output_files_match_deltalake(tmp_path: Path) -> None:
    for seed in (1, 2, 3):
        path = tmp_path / f"t{seed}"
        _write_table(path, seed)
        state = read_delta_state(str(path))
        sizes = sorted(state.files.column("size_bytes").to_pylist())
        target = sizes[len(sizes) // 2] * 4  # some files above the target, most below
        policy = TablePolicy(name="t", path=str(path), compaction=Compaction(
            target_file_size=target, min_file_size=target, triggers=Triggers(min_input_files=2)))
        plan = build_plan([policy], {"t": state}, now=dt.datetime.now(dt.timezone.utc), target=Target(),
                          project_name="p")
        actions = plan.tables[0].actions
        assert actions, "the random table must have something to compact"
        dt_ = DeltaTable(str(path))
        for a in actions:
            metrics = dt_.optimize.compact(partition_filters=[("part", "=", a.partition["part"])], target_size=target)
            assert metrics["numFilesAdded"] == a.expected_output_files, (seed, a.partition)
            assert metrics["numFilesRemoved"] == a.input_files, (seed, a.partition)
        # and the files delta-rs removed are exactly the planned inputs
        after = set(pa.table(DeltaTable(str(path)).get_add_actions(flatten=True)).column("path").to_pylist())
        planned = {p for a in actions for p in a.input_paths}
        assert planned.isdisjoint(after)
        assert set(state.files.column("path").to_pylist()) - planned <= after
