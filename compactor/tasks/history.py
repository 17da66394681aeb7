"""Run history: every apply appends one JSON file (run_results schema) under <target>/history/."""

from __future__ import annotations

import json
import re
from pathlib import Path

from compactor.models.results import RunResults
from compactor.runtime.atomic_file import replace_with

HISTORY_DIR = "history"


def record_run(target_dir: Path, results: RunResults) -> Path:
    """Write one run; file names sort by time (run ids start with a UTC timestamp)."""
    d = Path(target_dir) / HISTORY_DIR
    d.mkdir(parents=True, exist_ok=True)
    # the id is data, not a path: a "/" or ".." in it must not place the file outside history/
    name = re.sub(r"[^A-Za-z0-9_.-]", "_", results.run_id).lstrip(".") or "run"
    return replace_with(d / f"{name}.json", json.dumps(results.to_dict(), indent=1, default=str))


def load_history(target_dir: Path, table: str | None = None, last: int | None = None) -> list[RunResults]:
    """Runs oldest first; with ``table``, only runs that touched it (and only its results)."""
    d = Path(target_dir) / HISTORY_DIR
    if not d.is_dir():
        return []
    runs = []
    for p in sorted(d.glob("*.json")):
        try:
            run = RunResults.from_dict(json.loads(p.read_text()))
        except (ValueError, TypeError, KeyError):
            continue  # a foreign or torn file is not history
        if table is not None:
            run.results = [r for r in run.results if r.table == table]
            if not run.results:
                continue
        runs.append(run)
    runs.sort(key=lambda r: (r.started_at, r.run_id))  # run ids sort by second only
    return runs[-last:] if last else runs
