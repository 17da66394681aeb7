"""Metrics for dashboards: Prometheus text format (node-exporter textfile collector) or JSON lines."""

from __future__ import annotations

import json
import time
from collections import defaultdict
from pathlib import Path
from typing import Any, Literal

from compactor.errors import UsageError
from compactor.models.results import RunResults
from compactor.planning.plan import Plan
from compactor.planning.vocabulary import rewrite_types
from compactor.runtime.atomic_file import replace_with

Format = Literal["prometheus", "jsonl"]


def _esc(v: str) -> str:
    return v.replace("\\", "\\\\").replace("\n", "\\n").replace('"', '\\"')


def plan_samples(plan: Plan) -> list[tuple[str, str, dict[str, str], float]]:
    """(metric, help, labels, value) for a plan."""
    out: list[tuple[str, str, dict[str, str], float]] = []
    for t in plan.tables:
        lab = {"table": t.name, "format": t.format}
        small = sum(int(s.details.get("small_files", 0) or 0) for s in t.skipped) + \
            sum(a.input_files for a in t.actions if a.rewrites)
        out += [
            ("compactor_table_files", "Live data files of the table when planned", lab, t.files_before),
            ("compactor_table_small_files", "Files below min_file_size (partitions in scope)", lab, small),
            ("compactor_plan_files_after", "Predicted files after applying the plan", lab, t.files_after),
            ("compactor_plan_actions", "Planned actions", lab, len(t.actions)),
            ("compactor_plan_bytes_to_rewrite", "Bytes the plan would rewrite", lab,
             sum(a.input_bytes for a in t.actions if a.rewrites)),
            ("compactor_plan_table_error", "1 when the table could not be planned", lab, 1 if t.error else 0),
        ]
    return out


def run_samples(run: RunResults) -> list[tuple[str, str, dict[str, str], float]]:
    per: dict[str, dict[str, float]] = defaultdict(lambda: defaultdict(float))
    rewrites = rewrite_types()
    for r in run.results:
        t = per[r.table]
        t["files_removed"] += r.files_removed
        t["files_added"] += r.files_added
        t["bytes"] += r.bytes_removed if r.type in rewrites and r.status == "success" else 0
        t["duration"] += r.duration_s
        t[r.status] += 1
    out: list[tuple[str, str, dict[str, str], float]] = []
    for table, t in per.items():
        lab = {"table": table}
        out += [
            ("compactor_apply_files_removed", "Files removed by the last apply", lab, t["files_removed"]),
            ("compactor_apply_files_added", "Files added by the last apply", lab, t["files_added"]),
            ("compactor_apply_bytes_rewritten", "Bytes rewritten by the last apply", lab, t["bytes"]),
            ("compactor_apply_duration_seconds", "Time spent on the table's actions", lab, t["duration"]),
            ("compactor_apply_failures", "Actions that failed or failed verification", lab,
             t["error"] + t["verification_failed"]),
        ]
        for status in ("success", "skipped", "stale", "error", "verification_failed"):
            out.append(("compactor_apply_actions", "Actions by status", {**lab, "status": status}, t[status]))
    out.append(("compactor_apply_last_run_timestamp_seconds", "When the last apply finished", {}, time.time()))
    return out


def render_prometheus(samples: list[tuple[str, str, dict[str, str], float]]) -> str:
    lines: list[str] = []
    seen: set[str] = set()
    for name, help_, labels, value in sorted(samples, key=lambda s: s[0]):
        if name not in seen:
            seen.add(name)
            lines += [f"# HELP {name} {help_}", f"# TYPE {name} gauge"]
        lab = ",".join(f'{k}="{_esc(str(v))}"' for k, v in labels.items())
        lines.append(f"{name}{{{lab}}} {float(value):g}" if lab else f"{name} {float(value):g}")
    return "\n".join(lines) + "\n"


def write_metrics(path: Path, *, plan: Plan | None = None, run: RunResults | None = None,
                  format: Format | None = None) -> Path:
    path = Path(path)
    fmt = format or ("jsonl" if path.suffix in (".jsonl", ".json") else "prometheus" if path.suffix in (".prom", ".txt", "") else None)
    if fmt is None:
        raise UsageError(f"cannot tell the metrics format from {path.name}", hint="use a .prom or .jsonl file")
    samples = (plan_samples(plan) if plan else []) + (run_samples(run) if run else [])
    if fmt == "prometheus":
        text = render_prometheus(samples)
    else:
        now = time.time()
        text = "".join(json.dumps({"metric": n, "labels": lab, "value": v, "timestamp": now}) + "\n"
                       for n, _, lab, v in samples)
    path.parent.mkdir(parents=True, exist_ok=True)
    return replace_with(path, text)  # whole, for the textfile collector


def samples_as_dicts(samples: list[tuple[str, str, dict[str, str], float]]) -> list[dict[str, Any]]:
    return [{"metric": n, "labels": lab, "value": v} for n, _, lab, v in samples]
