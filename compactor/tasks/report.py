"""Collect report data (table states now and before the last apply, the plan, run history) and render
one self-contained HTML page."""

from __future__ import annotations

import datetime as dt
import html
import json
import math
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from compactor.output.report.svg import bar_chart
from compactor.planning.plan import REWRITE_ACTIONS
from compactor.project.model import ProjectOptions
from compactor.units import format_size

if TYPE_CHECKING:  # pragma: no cover
    from compactor.models.results import RunResults
    from compactor.planning.plan import Plan, TablePlan

BLUE, GREY, ORANGE = "#3b6fd6", "#9aa4b2", "#e8833a"


@dataclass
class TableReport:
    name: str
    format: str
    path: str
    target_file_size: int
    min_file_size: int
    sizes_now: list[int] = field(default_factory=list)
    sizes_before: list[int] | None = None
    #: partition label -> (files, small files)
    partitions: dict[str, tuple[int, int]] = field(default_factory=dict)
    planned: set[str] = field(default_factory=set)
    #: per run in history: (run id, files removed, files added, bytes rewritten, files after, mean size after)
    trend: list[tuple[str, int, int, int, int | None, float | None]] = field(default_factory=list)
    #: sink outputs: per metadata log file (batch, bytes, entries, is_compact), and per checkpoint source
    manifest: list[tuple[int, int, int, bool]] = field(default_factory=list)
    checkpoint_sources: dict[str, list[tuple[int, int, int, bool]]] = field(default_factory=dict)
    error: str | None = None


def _part_label(values: dict[str, Any]) -> str:
    return "/".join(f"{k}={v}" for k, v in values.items()) or "(table)"


def _histogram(sizes: list[int], lo: int, hi: int) -> list[int]:
    counts = [0] * (hi - lo + 1)
    for s in sizes:
        counts[min(hi, max(lo, int(math.log2(max(s, 1))))) - lo] += 1
    return counts


def collect_report(options: ProjectOptions, plan: "Plan | None" = None, history_runs: int = 20) -> list[TableReport]:
    from compactor import api
    from compactor.tasks.history import load_history
    from compactor.tasks.plan import expand_policies, read_state
    from compactor.project.compile import compile_project
    from compactor.formats.delta.state import read_delta_state

    compiled = compile_project(options)
    plan = plan or api.plan(options)
    planned: dict[str, set[str]] = {t.name: {_part_label(dict(a.partition)) for a in t.actions
                                             if a.type in REWRITE_ACTIONS}
                                    for t in plan.tables}
    runs = load_history(compiled.project.target_dir, last=history_runs)
    out = []
    for p in expand_policies(compiled.policies, compiled.project.root, compiled.target.storage_options):
        if not p.enabled:
            continue
        rep = TableReport(p.name, p.format, p.path or p.name, p.compaction.target_file_size, p.compaction.min_file_size,
                          planned=planned.get(p.name, set()))
        state = read_state(p, compiled.target)
        if isinstance(state, Exception):
            rep.error = str(state)
            out.append(rep)
            continue
        f = state.files
        rep.sizes_now = f.column("size_bytes").to_pylist()
        cols = [f.column(f"partition.{c}").to_pylist() for c in state.partition_columns]
        for i, size in enumerate(rep.sizes_now):
            label = _part_label({c: cols[j][i] for j, c in enumerate(state.partition_columns)})
            files, small = rep.partitions.get(label, (0, 0))
            rep.partitions[label] = (files + 1, small + (size < p.compaction.min_file_size))
        if p.format == "spark_file_sink":
            so = compiled.target.storage_options
            rep.manifest = _log_growth(f"{str(p.path).rstrip('/')}/_spark_metadata", so)
            if p.sink and p.sink.checkpoint:
                from compactor.runtime.storage import StorageError, storage_for

                cp = p.sink.checkpoint.rstrip("/")
                try:
                    sources = storage_for(cp, so).list_dir("sources")[1]
                except StorageError:
                    sources = []
                for d in sources:
                    rep.checkpoint_sources[d.rsplit("/", 1)[-1]] = _log_growth(f"{cp}/{d}", so)
        mine = [r for r in runs if any(x.table == p.name for x in r.results)]
        for r in mine:
            res = [x for x in r.results if x.table == p.name]
            after_v = max((x.table_version_after for x in res if x.table_version_after is not None), default=None)
            files_after = mean_after = None
            if p.format == "delta" and after_v is not None:
                try:
                    s = read_delta_state(p.path, compiled.target.storage_options, version=after_v)
                    files_after = s.file_count
                    mean_after = s.total_bytes / max(1, s.file_count)
                except Exception:  # noqa: BLE001 - vacuumed history is simply not drawn
                    pass
            rep.trend.append((r.run_id, sum(x.files_removed for x in res), sum(x.files_added for x in res),
                              sum(x.bytes_removed for x in res if x.status == "success"), files_after, mean_after))
        if mine and p.format == "delta":
            res = [x for x in mine[-1].results if x.table == p.name and x.table_version_before is not None]
            if res:
                try:
                    before = read_delta_state(p.path, compiled.target.storage_options,
                                              version=min(x.table_version_before for x in res))
                    rep.sizes_before = before.files.column("size_bytes").to_pylist()
                except Exception:  # noqa: BLE001
                    rep.sizes_before = None
        out.append(rep)
    return out


def _log_growth(directory: Path | str, storage_options: Any = None) -> list[tuple[int, int, int, bool]]:
    """(batch, bytes, entries, is_compact) for each file of a Spark metadata log."""
    from compactor.formats.file_sink.log import list_log

    try:
        log = list_log(directory, storage_options)
    except Exception:  # noqa: BLE001 - a missing or broken log is just not drawn
        return []
    out = []
    for f in sorted(log.files, key=lambda f: f.batch):
        try:
            n = len(log.read_entries(f))
        except Exception:  # noqa: BLE001
            n = 0
        out.append((f.batch, f.size, n, f.compact))
    return out


def _log_charts(chart: str, title: str, rows: list[tuple[int, int, int, bool]]) -> str:
    labels = [f"{b}{'.compact' if c else ''}" for b, _, _, c in rows]
    return (bar_chart(f"{chart}-bytes", f"{title}: bytes per log file", labels, [("bytes", [r[1] for r in rows], BLUE)],
                      highlight=[r[3] for r in rows])
            + bar_chart(f"{chart}-entries", f"{title}: entries per log file (orange = .compact)", labels,
                        [("entries", [r[2] for r in rows], BLUE)], highlight=[r[3] for r in rows]))


def _table_section(t: TableReport) -> str:
    esc = html.escape
    parts = [f'<section class="table" data-table="{esc(t.name)}"><h2>{esc(t.name)} <small>{esc(t.format)} · '
             f'{esc(t.path)}</small></h2>']
    if t.error:
        return "".join(parts) + f'<p class="err">{esc(t.error)}</p></section>'
    all_sizes = t.sizes_now + (t.sizes_before or [])
    lo = int(math.log2(max(1, min(all_sizes)))) if all_sizes else 10
    hi = max(int(math.log2(max(1, max(all_sizes)))) if all_sizes else 10, int(math.log2(t.target_file_size)))
    labels = [format_size(2 ** b) for b in range(lo, hi + 1)]
    series = [("now", _histogram(t.sizes_now, lo, hi), BLUE)]
    if t.sizes_before is not None:
        series.insert(0, ("before last apply", _histogram(t.sizes_before, lo, hi), GREY))
    small = sum(1 for s in t.sizes_now if s < t.min_file_size)
    parts.append(f'<p class="facts"><b>{len(t.sizes_now)}</b> files, {format_size(sum(t.sizes_now))}, mean '
                 f'{format_size(sum(t.sizes_now) / max(1, len(t.sizes_now)))}; <b>{small}</b> below min_file_size '
                 f'({format_size(t.min_file_size)}); target {format_size(t.target_file_size)}.</p>')
    parts.append(bar_chart("size-histogram", "File sizes (log2 buckets; line = target size)", labels, series,
                           marker_index=math.log2(t.target_file_size) - lo, marker_label="target", y_label="files"))
    names = sorted(t.partitions)[:60]
    parts.append(bar_chart(
        "small-file-share", "Small-file share per partition (orange = the current plan compacts it)", names,
        [("small-file share %", [round(100 * t.partitions[n][1] / max(1, t.partitions[n][0]), 1) for n in names], BLUE)],
        highlight=[n in t.planned for n in names], y_label="% small"))
    if t.manifest:
        parts.append(_log_charts("manifest", "_spark_metadata", t.manifest))
    for name, rows in t.checkpoint_sources.items():
        if rows:
            parts.append(_log_charts(f"checkpoint-source-{name}", f"checkpoint sources/{name}", rows))
    if t.trend:
        runs = [r[0][:15] for r in t.trend]
        parts.append(bar_chart("trend-files", "Per apply run: files removed and added", runs,
                               [("removed", [r[1] for r in t.trend], GREY), ("added", [r[2] for r in t.trend], BLUE)]))
        parts.append(bar_chart("trend-bytes", "Per apply run: bytes rewritten", runs,
                               [("bytes rewritten", [r[3] for r in t.trend], ORANGE)]))
        if any(r[4] is not None for r in t.trend):
            parts.append(bar_chart("trend-file-count", "After each apply: live files", runs,
                                   [("files", [r[4] or 0 for r in t.trend], BLUE)]))
            parts.append(bar_chart("trend-mean-size", "After each apply: mean file size", runs,
                                   [("mean size", [r[5] or 0 for r in t.trend], BLUE)]))
    return "".join(parts) + "</section>"


CSS = """body{font:14px system-ui,-apple-system,Segoe UI,sans-serif;margin:24px;color:#1d2330}
h1{font-size:20px}h2{font-size:16px;margin-top:28px}small{color:#667;font-weight:normal}
.chart{width:100%;max-width:720px;display:block;margin:8px 0 18px;background:#fafbfd;border:1px solid #e3e7ee}
.t{font-size:12px;font-weight:600}.l{font-size:10px;fill:#556}.axis{stroke:#99a}.marker{stroke:#d33;stroke-dasharray:4 3}
rect.hl{fill:#e8833a}.err{color:#b00}#errors:empty{display:none}#errors{color:#b00}"""

SCRIPT = """window.__errors=[];window.onerror=function(m){window.__errors.push(String(m));
document.getElementById('errors').textContent=window.__errors.join('\\n');};
document.addEventListener('DOMContentLoaded',function(){var c=document.querySelectorAll('svg.chart');var ok=true;
c.forEach(function(s){if(!s.querySelector('rect[data-value]'))ok=false;});
document.body.setAttribute('data-rendered',ok&&c.length>0?'yes':'no');document.body.setAttribute('data-charts',c.length);});"""


def build_report(tables: list[TableReport], *, title: str = "compactor report", generated_at: str | None = None) -> str:
    generated_at = generated_at or dt.datetime.now(dt.timezone.utc).isoformat(timespec="seconds")
    body = "".join(_table_section(t) for t in tables) or "<p>No tables selected.</p>"
    data = json.dumps([{"name": t.name, "files": len(t.sizes_now), "planned_partitions": sorted(t.planned)}
                       for t in tables])
    return (f"<!doctype html><html lang=\"en\"><head><meta charset=\"utf-8\"><title>{html.escape(title)}</title>"
            f"<style>{CSS}</style><script>{SCRIPT}</script></head><body><h1>{html.escape(title)}</h1>"
            f"<p>Generated {html.escape(generated_at)}. Self-contained: no network access needed.</p>"
            f"<pre id=\"errors\"></pre>{body}<script type=\"application/json\" id=\"report-data\">"
            f"{html.escape(data, quote=False)}</script></body></html>")


def write_report(path: Path, tables: list[TableReport]) -> Path:
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(build_report(tables), encoding="utf-8")
    return path
