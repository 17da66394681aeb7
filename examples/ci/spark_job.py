"""A spark-submit / Databricks job entry point: compaction with the spark engine in the job's session.

    spark-submit --packages io.delta:delta-spark_4.1_2.13:4.4.0 examples/ci/spark_job.py /path/to/project prod

On Databricks, run it as a Python task; the active SparkSession is reused (compactor never creates a
second one).
"""

from __future__ import annotations

import sys
from pathlib import Path


def main(project_dir: str, target: str | None = None) -> int:
    from pyspark.sql import SparkSession

    from compactor import api
    from compactor.api import ProjectOptions

    SparkSession.builder.getOrCreate()  # spark-submit / Databricks provide the session
    opts = ProjectOptions(project_dir=Path(project_dir), target=target)
    plan = api.plan(opts, out=Path(project_dir) / "target" / "plan.json")
    if not plan.has_changes:
        print("nothing to compact")
        return 0
    run = api.apply(opts, plan_obj=plan)
    print(f"compactor: {run.totals.succeeded} succeeded, {run.totals.errors} failed, "
          f"{run.totals.files_removed} -> {run.totals.files_added} files")
    return 0 if run.ok else 1


if __name__ == "__main__":
    sys.exit(main(sys.argv[1], sys.argv[2] if len(sys.argv) > 2 else None))
