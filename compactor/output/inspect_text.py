"""Text rendering of an InspectReport (histogram bars per partition)."""

from __future__ import annotations

from compactor.models.inspect import BUCKET_LABELS, InspectReport
from compactor.units import format_setting_size


def _size(n: float) -> str:
    for unit in ("B", "KiB", "MiB", "GiB", "TiB"):
        if abs(n) < 1024 or unit == "TiB":
            return f"{n:.0f} {unit}" if unit == "B" else f"{n:.1f} {unit}"
        n /= 1024
    return str(n)


def render_inspect_text(r: InspectReport, *, width: int = 30) -> str:
    lines = [f"{r.path}  ({r.kind})"]
    if r.kind != "checkpoint":
        lines.append(f"files: {r.file_count}  size: {_size(r.total_bytes)}  small (<{format_setting_size(r.small_file_threshold)}): "
                     f"{r.small_files} ({r.small_file_share:.0%})")
        for p in r.partitions:
            lines.append(f"\n  {p.partition}: {p.files} file(s), {_size(p.bytes)}")
            peak = max(p.histogram.values()) or 1
            for label in BUCKET_LABELS:
                n = p.histogram[label]
                if n:
                    lines.append(f"    {label:>10} {'#' * max(1, round(n / peak * width)):<{width}} {n}")
    for lh in r.logs:
        growth = "n/a" if lh.growth_bytes_per_batch is None else f"{_size(lh.growth_bytes_per_batch)}/batch"
        lines += [f"\nlog {lh.directory}",
                  f"  batches: latest {lh.latest_batch}, {lh.log_files} log file(s), {lh.retained_batch_files} plain "
                  f"batch file(s) retained",
                  f"  compact interval (derived): {lh.compact_interval}"
                  + (f" (policy: {r.policy.compact_interval})" if r.policy.compact_interval else ""),
                  f"  newest .compact: {lh.latest_compact or '-'} {_size(lh.newest_compact_bytes)}, growth {growth}",
                  f"  entries: {lh.entries}, estimated driver memory {_size(lh.estimated_driver_memory_bytes)}"]
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
