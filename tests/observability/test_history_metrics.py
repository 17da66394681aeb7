"""History and metrics end to end after two real applies."""

from __future__ import annotations

import json
import re
import subprocess
import sys
from pathlib import Path

import jsonschema

from compactor import api
from compactor.api import ProjectOptions
from compactor.policy.schema import load_schema
from compactor.tasks.history import load_history
from tests.apply.helpers import make_table, one_table_project


def test_history_and_metrics_after_two_applies(tmp_path: Path) -> None:
    t = tmp_path / "lake" / "t"
    n = make_table(t, partitions=2, appends=6)
    p = one_table_project(tmp_path / "proj", t)
    opts = ProjectOptions(project_dir=p)
    run1 = api.apply(opts)
    make_table(t, partitions=2, appends=3, start=n)  # more small files arrive
    prom = tmp_path / "metrics" / "compactor.prom"
    r = subprocess.run([sys.executable, "-m", "compactor", "apply", "--project-dir", str(p), "--auto-approve",
                        "--metrics", str(prom)], capture_output=True, text=True)
    assert r.returncode == 0, r.stderr
    runs = load_history(p / "target")
    assert [x.run_id for x in runs][0] == run1.run_id and len(runs) == 2
    for f in (p / "target" / "history").glob("*.json"):
        jsonschema.validate(json.loads(f.read_text()), load_schema("run_results.schema.json"))
    assert runs[1].totals.files_removed == 2 * 4 and runs[1].totals.files_added == 2  # 1 old + 3 new per partition
    text = prom.read_text()
    assert "# TYPE compactor_apply_files_removed gauge" in text
    assert re.search(r'^compactor_apply_files_removed\{table="t"\} 8$', text, re.M)
    assert re.search(r'^compactor_apply_actions\{table="t",status="success"\} 2$', text, re.M)
    # plan metrics as JSON lines
    jl = tmp_path / "plan.jsonl"
    r = subprocess.run([sys.executable, "-m", "compactor", "plan", "--project-dir", str(p), "--metrics", str(jl)],
                       capture_output=True, text=True)
    assert r.returncode == 0, r.stderr
    rows = [json.loads(line) for line in jl.read_text().splitlines()]
    files = next(x for x in rows if x["metric"] == "compactor_table_files")
    assert files["labels"] == {"table": "t", "format": "delta"} and files["value"] == 2
    # history command
    h = subprocess.run([sys.executable, "-m", "compactor", "history", "--project-dir", str(p), "--format", "json",
                        "--last", "1"], capture_output=True, text=True)
    assert h.returncode == 0 and json.loads(h.stdout)[0]["run_id"] == runs[1].run_id
    h = subprocess.run([sys.executable, "-m", "compactor", "history", "--project-dir", str(p)],
                       capture_output=True, text=True, env={"COLUMNS": "200", "PATH": ""})
    assert h.returncode == 0 and "8 -> 2" in h.stdout
