"""`compactor repair [PATH]`: find and repair duplicate rewrites (rows live twice after two compactions
of the same files committed)."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

import click

from compactor.cli import exit_codes
from compactor.cli.common import build_options, debug_option, echo_json, handle_errors, project_options

if TYPE_CHECKING:  # pragma: no cover
    from compactor.api import RepairReport


@click.command("repair")
@click.argument("path", required=False)
@project_options
@click.option("--dry-run", is_flag=True, help="Show the repair (proved on the files); commit nothing.")
@click.option("--auto-approve", is_flag=True, help="Commit the repair shown without asking (needed when not on a terminal).")
@click.option("--horizon", type=click.IntRange(min=1), default=None,
              help="How many of the newest commits to scan (default 1000).")
@click.option("--format", "fmt", type=click.Choice(["text", "json"]), default="text", show_default=True)
@debug_option
@handle_errors
def command(path: str | None, project_dir: Path, profiles_dir: Path | None, target: str | None, vars_text: str | None,
            select: tuple[str, ...], exclude: tuple[str, ...], dry_run: bool, auto_approve: bool, horizon: int | None,
            fmt: str, debug: bool) -> int:
    """Repair rows live twice in the table at PATH, or in every selected table of the project, whose
    format's log can hold them (a second compaction of the same files, a stale repair, a re-added file):
    shows the repair first (the files it removes and restores, the rows, proved on the files' contents),
    asks, then commits exactly that repair in one commit that changes no data. A second run is a no-op."""
    import sys

    from compactor import api
    from compactor.errors import UsageError

    options = None if path is not None else build_options(project_dir, profiles_dir, target, vars_text, select,
                                                          exclude)

    def run(*, dry_run: bool = False, approved: RepairReport | None = None) -> RepairReport:
        return api.repair(path=path, horizon=horizon, dry_run=dry_run, approved=approved) if options is None else \
            api.repair(options, horizon=horizon, dry_run=dry_run, approved=approved)

    import dataclasses

    shown = run(dry_run=True)  # the repair is always shown (and derived) first; a dry run only when asked
    to_repair = [t for t in shown.tables if t.status == "would_repair"]
    if dry_run or not to_repair:
        _show(dataclasses.replace(shown, dry_run=dry_run), fmt)
        return exit_codes.OK if shown.ok else exit_codes.FAILURE
    if fmt == "text":
        click.echo(render_repair_text(dataclasses.replace(shown, dry_run=False)))
    if not auto_approve:
        if not sys.stdin.isatty():
            raise UsageError("refusing to commit a repair nobody approved without a terminal",
                             hint="review `compactor repair --dry-run`, then pass --auto-approve")
        if not click.confirm(f"Commit the repair of {len(to_repair)} table(s)?", default=False):
            click.echo("Repair cancelled.")
            return exit_codes.OK
    done = run(approved=shown)
    _show(done, fmt)
    return exit_codes.OK if done.ok and shown.ok else exit_codes.FAILURE


def _show(report: RepairReport, fmt: str) -> None:
    if fmt == "json":
        echo_json(report.to_dict())
    else:
        click.echo(render_repair_text(report))


def render_repair_text(report: RepairReport) -> str:
    lines = []
    for t in report.tables:
        if t.status in ("error", "verification_failed"):
            lines.append(f"{t.table}: {t.status}: {t.error}")
        elif t.status == "skipped":
            lines.append(f"{t.table}: skipped ({t.result.get('reason')})")
        else:  # clean, would_repair, repaired: in the format's words
            lines += t.text
    ok = sum(1 for t in report.tables if t.status in ("repaired", "would_repair"))
    pending = any(t.status == "would_repair" for t in report.tables)
    lines.append(f"{'DRY RUN: ' if report.dry_run else ''}{ok} table(s) "
                 f"{'to repair' if report.dry_run or pending else 'repaired'}"
                 f", {sum(1 for t in report.tables if t.status == 'clean')} clean, "
                 f"{sum(1 for t in report.tables if t.status in ('error', 'verification_failed'))} failed")
    return "\n".join(lines)
