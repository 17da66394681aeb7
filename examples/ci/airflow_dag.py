"""An Airflow DAG that plans and applies compaction nightly through compactor's Python API.

The task callables are plain functions (no Airflow needed to import or test them); the DAG is built
only when Airflow is installed.
"""

from __future__ import annotations

from pathlib import Path

PROJECT_DIR = Path(__file__).resolve().parents[2] / "policies"


def plan_compaction(project_dir: str | Path = PROJECT_DIR, target: str | None = None, **_: object) -> str:
    """Writes target/plan.json and returns its path (pushed to XCom by Airflow)."""
    from compactor import api
    from compactor.api import ProjectOptions

    opts = ProjectOptions(project_dir=Path(project_dir), target=target, select=("tag:nightly",))
    out = Path(project_dir) / "target" / "plan.json"
    api.plan(opts, out=out)
    return str(out)


def apply_compaction(plan_file: str, project_dir: str | Path = PROJECT_DIR, target: str | None = None,
                     **_: object) -> dict:
    """Applies exactly the plan the previous task wrote; fails the task if any action failed."""
    from compactor import api
    from compactor.api import ProjectOptions

    run = api.apply(ProjectOptions(project_dir=Path(project_dir), target=target), plan_file=Path(plan_file))
    if not run.ok:
        raise RuntimeError(f"compactor apply failed: {run.totals}")
    return {"run_id": run.run_id, "files_removed": run.totals.files_removed, "files_added": run.totals.files_added}


try:  # pragma: no cover - only where Airflow is installed
    import pendulum
    from airflow.decorators import dag, task

    @dag(schedule="0 2 * * *", start_date=pendulum.datetime(2024, 1, 1, tz="UTC"), catchup=False, tags=["compactor"])
    def compactor_nightly():
        plan_file = task(plan_compaction)()
        task(apply_compaction)(plan_file)

    compactor_nightly()
except ImportError:
    pass
