"""compactor's purge plan against real ``REORG TABLE ... WHERE <partition> APPLY (PURGE)`` (delta-spark) on
random Spark-written tables with deletion vectors: per partition, the files the plan lists are exactly the
files REORG's commit removes (with the deletion vectors the plan names), and its bins are as many as the
files REORG adds, a bin of one file included (OptimizeTableCommand keeps single-file bins for a reorg)."""

from __future__ import annotations

import datetime as dt
import random
from pathlib import Path
from typing import Any

import pytest

from compactor.formats.delta import FORMAT
from compactor.formats.delta.plan.planner import plan_delta_table
from compactor.formats.delta.plan.purge_action import PurgeAction
from compactor.formats.delta.read.log_replay import dv_key
from compactor.formats.delta.spark_sql import reorg_purge_sql
from compactor.models.table import TableLocation
from compactor.policy.model import Compaction, Purge, TablePolicy, Triggers
from tests import spark_tables as st

pytestmark = [pytest.mark.spark, pytest.mark.delta_jars]

MAX_FILE_SIZE = "spark.databricks.delta.optimize.maxFileSize"


def _random_dv_table(spark: Any, path: Path, seed: int) -> int:
    """2-3 days of 4-8 files of 20-600 rows (~1.5-42 kB), then a DELETE hitting about half of them; returns
    the maxFileSize drawn to give several bins, and bins of one."""
    rng = random.Random(seed)
    days = [f"2024-02-0{i + 1}" for i in range(rng.choice([2, 3]))]
    spec = [(d, rng.randint(20, 600)) for d in days for _ in range(rng.randint(4, 8))]
    rng.shuffle(spec)
    st.sized_files(spark, path, spec, properties={"delta.enableDeletionVectors": "true"})
    modulo = rng.choice([3, 7, 11])
    spark.sql(f"DELETE FROM delta.`{path}` WHERE (id DIV 1000000) % 2 = {seed % 2} AND id % {modulo} = 0")
    return rng.randint(30_000, 60_000)


@pytest.mark.parametrize("seed", [1, 2, 3])
def test_the_purge_plan_is_what_reorg_rewrites(delta_spark: Any, tmp_path: Path, seed: int) -> None:
    t = tmp_path / "t"
    max_fs = _random_dv_table(delta_spark, t, seed)
    state = FORMAT.read_state(TableLocation(str(t)))
    policy = TablePolicy(name="t", path=str(t), compaction=Compaction(
        enabled=False, target_file_size=max_fs, min_file_size=1, triggers=Triggers(min_input_files=2),
        purge=Purge(enabled=True, min_deleted_ratio=0.0)))
    plan = plan_delta_table(policy, state, now=dt.datetime.now(dt.UTC), engine="spark")
    purges = [a for a in plan.actions if isinstance(a, PurgeAction)]
    assert purges
    rows = delta_spark.read.format("delta").load(str(t)).count()
    single = 0
    for purge in purges:
        before = st.commit_versions(t)[-1]
        with st.session_conf(delta_spark, {MAX_FILE_SIZE: str(max_fs)}):
            delta_spark.sql(reorg_purge_sql(str(t), purge.partition)).collect()
        actions = st.commit_actions(t, st.commit_versions(t)[-1])
        assert st.commit_versions(t)[-1] == before + 1
        removed = {a["remove"]["path"]: dv_key(a["remove"].get("deletionVector")) for a in actions if "remove" in a}
        added = [a["add"] for a in actions if "add" in a]
        assert removed == dict(zip(purge.input_paths, purge.deletion_vectors))
        assert len(added) == purge.expected_output_files and not any(a.get("deletionVector") for a in added)
        single += sum(1 for b in purge.bins if len(b) == 1)
    assert delta_spark.read.format("delta").load(str(t)).count() == rows
    assert single >= 1 or seed != 1  # the first seed has a bin of one file: REORG rewrites it too
