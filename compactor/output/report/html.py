"""The HTML page of `compactor report`: one self-contained file (inline SVG charts, no network access) from
the tables' report data (tasks/report.py collects it)."""

from __future__ import annotations

import datetime as dt
import html
import json
import math
from pathlib import Path

from compactor.models.report import LogPoint, RunPoint, TableReport
from compactor.output.report.style import CSS
from compactor.output.report.svg import bar_chart, fmt_bytes, fmt_percent
from compactor.units import format_setting_size, format_size

BLUE, GREY, ORANGE, GREEN = "#3b6fd6", "#9aa4b2", "#e8833a", "#2e7d32"
HALF_W = 640  # charts that share a row: drawn at this width, scaled by CSS


def _histogram(sizes: list[int], lo: int, hi: int) -> list[int]:
    counts = [0] * (hi - lo + 1)
    for s in sizes:
        counts[min(hi, max(lo, int(math.log2(max(s, 1))))) - lo] += 1
    return counts


def _log_charts(chart: str, title: str, rows: list[LogPoint]) -> str:
    labels = [f"{b}{'.compact' if c else ''}" for b, _, _, c in rows]
    return _grid(bar_chart(f"{chart}-bytes", f"{title}: bytes per log file (orange = .compact)", labels,
                           [("bytes", [r[1] for r in rows], BLUE)], highlight=[r[3] for r in rows],
                           width=HALF_W, value_format=fmt_bytes),
                 bar_chart(f"{chart}-entries", f"{title}: entries per log file (orange = .compact)", labels,
                           [("entries", [r[2] for r in rows], BLUE)], highlight=[r[3] for r in rows], width=HALF_W))


def _grid(*charts: str) -> str:
    """Charts side by side, sharing the page width (one per row on narrow screens)."""
    return '<div class="grid">' + "".join(charts) + "</div>"


def _run_labels(times: list[str]) -> list[str]:
    """Runs' dates for an axis, as short as keeps them apart: "2026-11-23" when each run is on its own
    day, else "Nov 23 04:42", else with seconds."""
    parsed = []
    for s in times:
        try:
            parsed.append(dt.datetime.fromisoformat(s.replace("Z", "+00:00")))
        except ValueError:
            return [s[:19] for s in times]
    for fmt in ("%Y-%m-%d", "%b %d %H:%M", "%b %d %H:%M:%S"):
        labels = [t.strftime(fmt) for t in parsed]
        if len(set(labels)) == len(labels):
            return labels
    seen: dict[str, int] = {}
    out = []
    for label in labels:  # runs within one second: numbered
        seen[label] = seen.get(label, 0) + 1
        out.append(label if seen[label] == 1 else f"{label} ({seen[label]})")
    return out


def _trend_charts(prefix: str, runs: list[RunPoint], *, per_table: bool) -> str:
    labels = _run_labels([r.finished_at for r in runs])
    x_title = "apply runs (UTC)"
    if per_table or any(r.files_after is None for r in runs):
        files = bar_chart(f"{prefix}trend-files", "Per apply run: files removed and added", labels,
                          [("removed", [r.files_removed for r in runs], GREY),
                           ("added", [r.files_added for r in runs], BLUE)], width=HALF_W, y_label="files",
                          x_title=x_title)
    else:
        # the lake: live files of the tables each run touched, before and after it
        after = [r.files_after or 0 for r in runs]
        before = [a + r.files_removed - r.files_added for a, r in zip(after, runs)]
        files = bar_chart(f"{prefix}trend-files", "Live files before and after each apply run", labels,
                          [("before", before, GREY), ("after", after, BLUE)], width=HALF_W, y_label="files",
                          x_title=x_title)
    charts = [
        files,
        bar_chart(f"{prefix}trend-bytes", "Per apply run: bytes rewritten", labels,
                  [("bytes rewritten", [r.bytes_rewritten for r in runs], ORANGE)], width=HALF_W,
                  value_format=fmt_bytes, x_title=x_title),
    ]
    if per_table and any(r.files_after is not None for r in runs):
        charts += [
            bar_chart(f"{prefix}trend-file-count", "After each apply: live files", labels,
                      [("files", [r.files_after or 0 for r in runs], BLUE)], width=HALF_W, y_label="files",
                      x_title=x_title),
            bar_chart(f"{prefix}trend-mean-size", "After each apply: mean file size", labels,
                      [("mean size", [r.mean_size_after or 0 for r in runs], BLUE)], width=HALF_W,
                      value_format=fmt_bytes, x_title=x_title),
        ]
    return _grid(*charts)


def _table_section(t: TableReport) -> str:
    esc = html.escape
    parts = [f'<section class="table" data-table="{esc(t.name)}">'
             f'<h2 id="t-{esc(t.name)}" data-benefit="{t.benefit}">{esc(t.name)} '
             f'<small>{esc(t.format)} · {esc(t.path)}</small></h2>']
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
    at_ideal = sum(1 for k in t.partitions if t.small_share(k) == 0 and t.partitions[k][1])
    said = [line.removeprefix("skipped ") for line in t.verdict if line.startswith("skipped ")]
    plan = (f"The plan takes it from <b>{t.plan_files_before:,}</b> to <b>{t.plan_files_after:,}</b> files, "
            f"rewriting {format_size(t.plan_bytes)}." if t.benefit else "The plan leaves it as it is.")
    if said:  # the planner's words, as `compactor plan` prints them
        plan += ' <span class="skips">' + "; ".join(f"Skipped {esc(x)}." for x in said) + "</span>"
    parts.append(f'<p class="facts"><b>{len(t.sizes_now):,}</b> files, {format_size(sum(t.sizes_now))}, mean '
                 f'{format_size(sum(t.sizes_now) / max(1, len(t.sizes_now)))}; <b>{small:,}</b> below min_file_size '
                 f'({format_setting_size(t.min_file_size)}), target {format_setting_size(t.target_file_size)}'
                 + (f"; {at_ideal:,} partition(s) hold fewer bytes than one target-size file and are already "
                    "at their ideal file count" if at_ideal else "") + _deleted_facts(t) + f". {plan}</p>")
    names = sorted(t.partitions)[:60]
    shares = [round(100 * t.small_share(n), 1) for n in names]
    notes = ["ideal" if t.small_share(n) == 0 and t.partitions[n][1] else "" for n in names]
    parts.append(_grid(
        bar_chart("size-histogram", "File sizes (log2 buckets; red line = target size)", labels, series,
                  marker_index=math.log2(t.target_file_size) - lo, marker_label="target", y_label="files",
                  width=HALF_W),
        bar_chart("small-file-share", "Small-file share per partition (orange: the plan merges them)", names,
                  [("small-file share %", shares, BLUE)], highlight=[n in t.planned for n in names],
                  legend=[("planned", ORANGE), ("ideal: at its ideal file count", GREEN)] if any(notes) else
                  [("planned", ORANGE)],
                  y_label="% small", width=HALF_W, value_format=fmt_percent, notes=notes, y_max=100,
                  x_title=f"{len(names)} of {len(t.partitions)} partitions" if len(t.partitions) > len(names) else "")))
    for log in t.logs:
        if log.points:
            parts.append(_log_charts(log.chart, log.title, log.points))
    if t.trend:
        parts.append(_trend_charts("", t.trend, per_table=True))
    return "".join(parts) + "</section>"


def _deleted_facts(t: TableReport) -> str:
    """The table's soft-deleted rows (still in its files), and the partition holding most of them."""
    if not t.deleted_rows:
        return ""
    top = max(sorted(t.deleted_rows), key=lambda k: t.deleted_rows[k])
    return (f"; <b>{sum(t.deleted_rows.values()):,}</b> soft-deleted rows in {len(t.deleted_rows):,} partition(s) "
            f"(most in {html.escape(top)}: {t.deleted_rows[top]:,})")


def _lake_runs(tables: list[TableReport]) -> list[RunPoint]:
    """The runs that touched the selected tables, summed over those tables, oldest first."""
    by_run: dict[str, RunPoint] = {}
    unknown: set[str] = set()
    for t in tables:
        for r in t.trend:
            p = by_run.setdefault(r.run_id, RunPoint(r.run_id, r.finished_at, 0, 0, 0, 0))
            p.files_removed += r.files_removed
            p.files_added += r.files_added
            p.bytes_rewritten += r.bytes_rewritten
            if r.files_after is None:  # a format without history, or history gone: the run's total is unknown
                unknown.add(r.run_id)
            else:
                p.files_after = (p.files_after or 0) + r.files_after
    for run_id in unknown:
        by_run[run_id].files_after = None
    return sorted(by_run.values(), key=lambda r: (r.finished_at, r.run_id))


def _overview(tables: list[TableReport]) -> str:
    esc = html.escape
    ok = [t for t in tables if not t.error]
    files = sum(len(t.sizes_now) for t in ok)
    size = sum(sum(t.sizes_now) for t in ok)
    mergeable = sum(t.mergeable_small_files for t in ok)
    merged = sum(t.plan_input_files for t in ok)
    share = 100 * mergeable / max(1, files)
    before, after = sum(t.plan_files_before for t in ok), sum(t.plan_files_after for t in ok)
    tiles = [("tables", f"{len(tables):,}", f"{len(tables) - len(ok)} unreadable" if len(ok) < len(tables) else ""),
             ("files", f"{files:,}", f"{format_size(size)}"),
             ("small-file share", f"{share:.0f}%", f"{merged:,} small files the plan merges"),
             ("bytes", format_size(size), f"mean file {format_size(size / max(1, files))}"),
             ("the plan", f"{before:,} → {after:,}", f"files; rewrites {format_size(sum(t.plan_bytes for t in ok))}")]
    deleted = [t for t in ok if t.deleted_rows]
    if deleted:
        tiles.append(("soft-deleted rows", f"{sum(sum(t.deleted_rows.values()) for t in deleted):,}",
                      f"in {len(deleted):,} table(s); readers skip them, a purge drops them"))
    parts = ['<section class="overview" data-section="lake"><h2>Lake overview</h2><div class="tiles">']
    for name, value, sub in tiles:
        parts.append(f'<div class="tile" data-tile="{esc(name)}"><div class="k">{esc(name)}</div>'
                     f'<div class="v">{esc(value)}</div><div class="s">{esc(sub)}</div></div>')
    parts.append("</div>")
    runs = _lake_runs(tables)
    if runs:
        parts.append(_trend_charts("lake-", runs, per_table=False))
    else:
        parts.append('<p class="facts">No apply runs yet: trends appear after `compactor apply`.</p>')
    ranked = sorted(ok, key=lambda t: (-t.benefit, -t.mergeable_small_files, t.name))
    if ranked:
        parts.append('<table class="rank"><thead><tr><th>table</th><th>files</th><th>small-file share</th>'
                     '<th>bytes</th><th>plan: files before → after</th><th>rewrites</th></tr></thead><tbody>')
        for t in ranked:
            n = len(t.sizes_now)
            parts.append(f'<tr data-table="{esc(t.name)}"><td><a href="#t-{esc(t.name)}">{esc(t.name)}</a></td>'
                         f"<td>{n:,}</td><td>{100 * t.mergeable_small_files / max(1, n):.0f}%</td>"
                         f"<td>{format_size(sum(t.sizes_now))}</td>"
                         f"<td>{t.plan_files_before:,} → {t.plan_files_after:,}</td><td>{format_size(t.plan_bytes)}</td></tr>")
        parts.append("</tbody></table>")
    return "".join(parts) + "</section>"


def order_by_benefit(tables: list[TableReport]) -> list[TableReport]:
    """Most files removed by the plan first; then most mergeable small files; unreadable tables last."""
    return sorted(tables, key=lambda t: (t.error is not None, -t.benefit, -t.mergeable_small_files, t.name))


SCRIPT = """window.__errors=[];window.onerror=function(m){window.__errors.push(String(m));
document.getElementById('errors').textContent=window.__errors.join('\\n');};
document.addEventListener('DOMContentLoaded',function(){var c=document.querySelectorAll('svg.chart');var ok=true;
c.forEach(function(s){if(!s.querySelector('rect[data-value]'))ok=false;});
document.body.setAttribute('data-rendered',ok&&c.length>0?'yes':'no');document.body.setAttribute('data-charts',c.length);});"""


def build_report(tables: list[TableReport], *, title: str = "compactor report", generated_at: str | None = None) -> str:
    generated_at = generated_at or dt.datetime.now(dt.UTC).isoformat(timespec="seconds")
    tables = order_by_benefit(tables)
    body = _overview(tables) + "".join(_table_section(t) for t in tables) if tables else "<p>No tables selected.</p>"
    data = json.dumps([{"name": t.name, "files": len(t.sizes_now), "benefit": t.benefit,
                        "planned_partitions": sorted(t.planned)} for t in tables])
    return (f"<!doctype html><html lang=\"en\"><head><meta charset=\"utf-8\">"
            f"<meta name=\"viewport\" content=\"width=device-width, initial-scale=1\"><title>{html.escape(title)}</title>"
            f"<style>{CSS}</style><script>{SCRIPT}</script></head><body><main><h1>{html.escape(title)}</h1>"
            f"<p>Generated {html.escape(generated_at)}. Self-contained: no network access needed.</p>"
            f"<pre id=\"errors\"></pre>{body}<script type=\"application/json\" id=\"report-data\">"
            f"{html.escape(data, quote=False)}</script></main></body></html>")


def write_report(path: Path, tables: list[TableReport]) -> Path:
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(build_report(tables), encoding="utf-8")
    return path
