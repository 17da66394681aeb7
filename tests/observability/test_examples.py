"""examples/ci: the workflow's commands run for real, the Airflow callables and the Spark job are called."""

from __future__ import annotations

import importlib.util
import os
import shlex
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from compactor.tasks.demo import build_demo

EXAMPLES = Path(__file__).resolve().parents[2] / "examples" / "ci"


@pytest.fixture(scope="module")
def demo_master(tmp_path_factory) -> Path:
    demo = build_demo(tmp_path_factory.mktemp("examples") / "demo", with_sink=False)
    return demo.project_dir


@pytest.fixture
def project(demo_master: Path, tmp_path: Path) -> Path:
    """A fresh copy of the demo project and lake (the lake path in compactor.yml is rewritten)."""
    import shutil

    dst = tmp_path / "demo"
    shutil.copytree(demo_master, dst)
    cfg = dst / "compactor.yml"
    cfg.write_text(cfg.read_text().replace(str((demo_master / "lake").resolve()), str((dst / "lake").resolve())))
    return dst


def _module(name: str):
    spec = importlib.util.spec_from_file_location(name, EXAMPLES / f"{name}.py")
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def test_github_workflow_commands(project: Path) -> None:
    wf = yaml.safe_load((EXAMPLES / "github-actions.yml").read_text())
    runs = [s["run"] for job in ("plan", "deploy") for s in wf["jobs"][job]["steps"] if "run" in s]
    compactor_cmds = [r for r in runs if r.startswith("compactor ")]
    assert [c.split()[1] for c in compactor_cmds] == ["validate", "plan", "plan", "apply"]
    env = {**os.environ, "COLUMNS": "160"}
    for cmd in compactor_cmds:
        # the example deploys to `prod` (spark); this test runs the same commands on the local `dev` target
        shell = cmd.replace("--target prod", "--target dev")
        argv, _, redirect = shell.partition(">")
        r = subprocess.run([sys.executable, "-m", "compactor", *shlex.split(argv)[1:]], cwd=project, env=env,
                           capture_output=True, text=True)
        assert r.returncode == 0, (cmd, r.stdout[-1500:], r.stderr[-1500:])
        if redirect.strip():
            (project / redirect.strip()).write_text(r.stdout)
    assert (project / "plan.md").read_text().startswith("### compactor plan:")
    assert "compactor_apply_files_removed" in (project / "target" / "compactor.prom").read_text()


def test_airflow_dag_callables(project: Path) -> None:
    dag = _module("airflow_dag")
    plan_file = dag.plan_compaction(project_dir=project)
    result = dag.apply_compaction(plan_file, project_dir=project)
    assert result["files_removed"] == 300 and result["files_added"] == 6
    import pyarrow.parquet as pq
    from deltalake import DeltaTable

    assert pq.read_table(DeltaTable(str(project / "lake" / "events")).file_uris(), use_threads=False).num_rows == 120_000


@pytest.mark.spark
def test_spark_job_entry_point(spark, tmp_path: Path) -> None:
    """A small lake of its own: the job's cost is Spark per partition, not the demo's 300 files."""
    from tests.apply.helpers import make_table

    table = tmp_path / "lake" / "events"
    make_table(table, partitions=2, appends=3)
    p = tmp_path / "proj"
    (p / "policies").mkdir(parents=True)
    (p / "compactor.yml").write_text("name: p\nprofile: p\n")
    (p / "profiles.yml").write_text("p:\n  target: dev\n  outputs:\n    dev: {engine: local}\n"
                                    "    prod: {engine: spark, spark: {master: 'local[2]'}}\n")
    (p / "policies" / "t.yml").write_text(f"version: 1\ntables:\n  - name: events\n    path: {table}\n"
                                          "    compaction: {target_file_size: 1MiB, triggers: {min_input_files: 2}}\n")
    job = _module("spark_job")
    assert job.main(str(p), "prod") == 0
    import pyarrow as pa
    from deltalake import DeltaTable

    dt = DeltaTable(str(table))
    files = pa.table(dt.get_add_actions(flatten=True))
    assert files.num_rows == 2 and sum(files.column("num_records").to_pylist()) == 2 * 3 * 50
    assert dt.version() == 5 + 1  # versions 0-5 are the appends, then one commit (both partitions: a group)
    assert spark.range(3).count() == 3  # the job reused the active session and left it running
    assert job.main(str(p), "prod") == 0  # a second run finds nothing to compact
