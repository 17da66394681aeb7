"""`compactor history`: past applies with files before/after, bytes rewritten, duration, failures."""

from __future__ import annotations

from pathlib import Path

import click

from compactor.cli.common import build_options, debug_option, echo_json, handle_errors, project_options


@click.command("history")
@project_options
@click.option("--table", default=None, help="Only runs that touched this table.")
@click.option("--last", type=click.IntRange(min=1), default=20, show_default=True, help="How many runs.")
@click.option("--format", "fmt", type=click.Choice(["text", "json"]), default="text", show_default=True)
@debug_option
@handle_errors
def command(project_dir: Path, profiles_dir: Path | None, target: str | None, vars_text: str | None,
            select: tuple[str, ...], exclude: tuple[str, ...], table: str | None, last: int, fmt: str,
            debug: bool) -> int:
    """List past apply runs (from <target-path>/history)."""
    from rich.table import Table

    from compactor import api
    from compactor.output.apply_render import run_status
    from compactor.output.text import console as make_console
    from compactor.output.text import safe
    from compactor.units import format_size

    options = build_options(project_dir, profiles_dir, target, vars_text, select, exclude)
    runs = api.history(options, table=table, last=last)
    if fmt == "json":
        echo_json([r.to_dict() for r in runs])
        return 0
    t = Table(title=f"compactor history ({len(runs)} run(s))", title_justify="left")
    for col in ("run", "finished", "engine", "tables", "files removed -> added", "bytes rewritten", "duration",
                "status"):
        t.add_column(col)
    for r in runs:
        status = run_status(r)
        t.add_row(safe(r.run_id), safe(r.finished_at[:19]), safe(r.engine), str(len({x.table for x in r.results})),
                  f"{r.totals.files_removed} -> {r.totals.files_added}", format_size(r.totals.bytes_rewritten),
                  f"{r.totals.duration_s:.1f}s", status if status in ("ok", "dry run") else f"[red]{safe(status)}[/]")
    make_console().print(t)
    return 0
