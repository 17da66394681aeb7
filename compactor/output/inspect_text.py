"""Text rendering of an InspectReport (histogram bars per partition)."""

from __future__ import annotations

from compactor.models.inspect import BUCKET_LABELS, InspectReport
from compactor.units import format_setting_size, format_size


def render_inspect_text(r: InspectReport, *, width: int = 30) -> str:
    lines = [f"{r.path}  ({r.kind})"]
    if r.holds_table:
        lines.append(f"files: {r.file_count}  size: {format_size(r.total_bytes)}  small "
                     f"(<{format_setting_size(r.small_file_threshold)}): {r.small_files} ({r.small_file_share:.0%})")
        if r.deleted_rows:
            lines.append(f"soft-deleted rows: {r.deleted_rows:,} (still in the files; readers skip them)")
        for p in r.partitions:
            share = p.deleted_share
            dead = "" if not p.deleted_rows else f", {p.deleted_rows:,} soft-deleted row(s)" + (
                f" ({share:.1%} of its rows)" if share is not None else "")
            lines.append(f"\n  {p.partition}: {p.files} file(s), {format_size(p.bytes)}{dead}")
            peak = max(p.histogram.values()) or 1
            for label in BUCKET_LABELS:
                n = p.histogram[label]
                if n:
                    lines.append(f"    {label:>10} {'#' * max(1, round(n / peak * width)):<{width}} {n}")
    for section in r.sections:  # the format's words for its logs
        lines += [f"\n{section.heading}", *(f"  {line}" for line in section.lines)]
    if r.log_window is not None:  # a log that can hold duplicate rewrites was scanned
        w = r.log_window
        lines.append(f"\nduplicate rewrites (versions {w.first_version}..{w.last_version} scanned): "
                     f"{len(r.open_duplicates)} open, {len(r.duplicates) - len(r.open_duplicates)} repaired or void")
        for d in r.duplicates:
            rows = "?" if d.rows is None else f"{d.rows:,}"
            state = d.status + (f" by version {d.repaired_by}" if d.repaired_by is not None else "")
            lines.append(f"  version {d.later_version} rewrote {len(d.files)} file(s) already rewritten by "
                         f"version(s) {', '.join(map(str, d.earlier_versions))}: {rows} rows twice [{state}]")
    if r.warnings:
        lines.append("\nWARNINGS:")
        lines += [f"  ! {x}" for x in r.warnings]
    if r.recommendations:
        lines.append("\nrecommendations:")
        lines += [f"  - {x}" for x in r.recommendations]
    return "\n".join(lines)
