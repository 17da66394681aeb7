"""`compactor repair [PATH]`: find and repair duplicate rewrites (rows live twice after two compactions
of the same files committed)."""

from __future__ import annotations

import click

from compactor.cli import exit_codes
from compactor.cli.common import build_options, debug_option, echo_json, handle_errors, project_options


@click.command("repair")
@click.argument("path", required=False)
@project_options
@click.option("--dry-run", is_flag=True, help="Report what the repair would do; commit nothing.")
@click.option("--horizon", type=click.IntRange(min=1), default=None,
              help="How many of the newest commits to scan (default 1000).")
@click.option("--format", "fmt", type=click.Choice(["text", "json"]), default="text", show_default=True)
@debug_option
@handle_errors
def command(path, project_dir, profiles_dir, target, vars_text, select, exclude, dry_run, horizon, fmt, debug) -> int:
    """Repair the Delta table at PATH, or every selected table of the project: remove the extra copy a
    second compaction of the same files added and restore what it removed that nobody else holds, in one
    dataChange=false commit, rows checked from the parquet footers first. A second run is a no-op."""
    from compactor import api

    if path is not None:
        report = api.repair(path=path, dry_run=dry_run, horizon=horizon)
    else:
        report = api.repair(build_options(project_dir, profiles_dir, target, vars_text, select, exclude),
                            dry_run=dry_run, horizon=horizon)
    if fmt == "json":
        echo_json(report.to_dict())
    else:
        click.echo(render_repair_text(report))
    return exit_codes.OK if report.ok else exit_codes.FAILURE


def render_repair_text(report) -> str:
    lines = []
    for t in report.tables:
        if t.status == "clean":
            lines.append(f"{t.table}: no duplicate rewrites (versions {t.result['window'].get('first_version')}.."
                         f"{t.result['window'].get('last_version')} scanned)")
            continue
        if t.status in ("error", "verification_failed"):
            lines.append(f"{t.table}: {t.status}: {t.error}")
            continue
        if t.status == "skipped":
            lines.append(f"{t.table}: skipped ({t.result.get('reason')})")
            continue
        r = t.result
        verb = "would repair" if t.status == "would_repair" else "repaired"
        for d in r["duplicates"]:
            rows = "?" if d["rows"] is None else f"{d['rows']:,}"
            lines.append(f"{t.table}: {verb} duplicate rewrite: version {d['later_version']} rewrote {len(d['files'])} "
                         f"file(s) already rewritten by version(s) {', '.join(map(str, d['earlier_versions']))} "
                         f"({rows} rows live twice)")
        where = f" in version(s) {', '.join(map(str, r['repair_versions']))}" if r["repair_versions"] else ""
        lines.append(f"  {r['files_removed']} file(s) removed, {r['files_restored']} restored{where}: "
                     f"{r['rows_removed']:,} rows removed, {r['rows_restored']:,} restored, "
                     f"{r['rows_deduplicated']:,} duplicated rows gone")
    ok = sum(1 for t in report.tables if t.status in ("repaired", "would_repair"))
    lines.append(f"{'DRY RUN: ' if report.dry_run else ''}{ok} table(s) {'to repair' if report.dry_run else 'repaired'}"
                 f", {sum(1 for t in report.tables if t.status == 'clean')} clean, "
                 f"{sum(1 for t in report.tables if t.status in ('error', 'verification_failed'))} failed")
    return "\n".join(lines)
