"""The spark engine rewrites a commit group's bins in ONE Spark job (a task per bin), counted from Spark's
own job tracker; the sequential profile (``max_concurrent_rewrites: 1``) runs a job per bin. Each bin
becomes one file, rows stay exactly once, nothing of the staging is left, and the session's union
setting is as it was."""

from __future__ import annotations

from pathlib import Path

import pytest
from deltalake import DeltaTable

from compactor.engines.spark import UNION_PARTITIONING, SparkEngine
from compactor.project.model import Target
from compactor.tasks.apply import apply_plan
from tests.apply.helpers import exactly_once, make_table, plan_for

pytestmark = pytest.mark.spark


def _jobs(spark) -> int:
    return len(spark.sparkContext.statusTracker().getJobIdsForGroup())


@pytest.mark.parametrize("threads, jobs", [(None, 1), (1, 4)])
def test_a_commit_group_is_one_spark_job(spark, tmp_path: Path, threads: int | None, jobs: int) -> None:
    t = tmp_path / "t"
    n = make_table(t, partitions=4, appends=3)
    target = Target(engine="spark", threads=threads)
    plan = plan_for(t, engine="spark", method="rewrite")
    assert sum(len(a.bins) for a in plan.tables[0].actions) == 4
    setting = spark.conf.get(UNION_PARTITIONING)
    before = _jobs(spark)
    run = apply_plan(plan, target=target, engine=SparkEngine(target), watch_s=0)
    assert run.ok, [r.error for r in run.results]
    assert _jobs(spark) - before == jobs
    assert len(DeltaTable(str(t)).file_uris()) == 4
    exactly_once(t, n)
    assert not list(t.rglob("_compactor_staging_*")) and not list(t.rglob("__compactor_bin*"))
    assert spark.conf.get(UNION_PARTITIONING) == setting
