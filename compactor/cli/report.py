"""`compactor report`: one self-contained HTML file (or PNG charts) about the selected tables."""

from __future__ import annotations

from pathlib import Path

import click

from compactor.cli import exit_codes
from compactor.cli.common import (
    build_options,
    check_selection,
    debug_option,
    fail_on_empty_option,
    handle_errors,
    prepare_output,
    project_options,
)


@click.command("report")
@project_options
@click.option("--out", type=click.Path(dir_okay=False, path_type=Path), default=None,
              help="HTML file to write (default: <target-path>/report.html).")
@click.option("--format", "fmt", type=click.Choice(["html", "png"]), default="html", show_default=True)
@click.option("--png-dir", type=click.Path(file_okay=False, path_type=Path), default=None,
              help="Also write every chart as a PNG here (needs Chromium).")
@click.option("--plan", "plan_file", type=click.Path(dir_okay=False, path_type=Path), default=None,
              help="Highlight the partitions of this saved plan (default: plan now).")
@fail_on_empty_option
@debug_option
@handle_errors
def command(project_dir: Path, profiles_dir: Path | None, target: str | None, vars_text: str | None,
            select: tuple[str, ...], exclude: tuple[str, ...], out: Path | None, fmt: str, png_dir: Path | None,
            plan_file: Path | None, fail_on_empty: bool, debug: bool) -> int:
    """Charts of file sizes, small-file share per partition and history, for people and PRs."""
    from compactor import api
    from compactor.output.report.html import build_report
    from compactor.output.report.png import write_pngs

    options = build_options(project_dir, profiles_dir, target, vars_text, select, exclude)
    compiled = api.compile_project(options)
    if check_selection(options, compiled.policies, compiled.all_policies, fail_on_empty):
        return exit_codes.FAILURE
    target_dir = compiled.project.target_dir
    html_out = prepare_output(out or target_dir / "report.html", "--out") if fmt == "html" else None
    plan = api.load_plan(plan_file) if plan_file else None
    page = build_report(api.report(options, plan=plan, compiled=compiled))
    if html_out is not None:  # --format html
        html_out.write_text(page, encoding="utf-8")
        click.echo(f"report written to {html_out}")
    if fmt == "png" or png_dir:
        files = write_pngs(page, png_dir or target_dir / "report-png")
        click.echo(f"{len(files)} chart(s) written to {png_dir or target_dir / 'report-png'}")
    return 0
