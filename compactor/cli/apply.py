"""`compactor apply [PLAN]`: execute exactly a reviewed plan (or a fresh one, after confirmation)."""

from __future__ import annotations

import contextlib
import signal
import sys
import threading
from collections.abc import Iterator
from pathlib import Path

import click

from compactor.cli import exit_codes
from compactor.cli.common import (
    advice,
    build_options,
    check_selection,
    debug_option,
    fail_on_empty_option,
    handle_errors,
    lean_imports,
    plan_key,
    prepare_output,
    project_options,
)


@click.command("apply")
@click.argument("plan_file", required=False, type=click.Path(dir_okay=False, path_type=Path))
@project_options
@click.option("--auto-approve", is_flag=True, help="Apply a fresh plan without asking (needed when not on a terminal).")
@click.option("--dry-run", is_flag=True, help="Check preconditions and show what would happen; change nothing.")
@click.option("--fail-fast", is_flag=True, help="Stop at the first failed action.")
@click.option("--replan-stale", is_flag=True, help="Re-plan partitions whose planned files changed, instead of skipping them.")
@click.option("--format", "fmt", type=click.Choice(["text", "json"]), default="text", show_default=True)
@click.option("--metrics", type=click.Path(dir_okay=False, path_type=Path), default=None,
              help="Also write metrics (.prom: Prometheus text format, .jsonl: JSON lines).")
@click.option("--watch", "watch", default=None, metavar="DURATION",
              help="Keep watching each table's log this long after committing and repair a concurrent "
                   "compaction of the same files (default: the profile's watch_window, 3m; 0: off).")
@click.option("--max-runtime", "max_runtime", default=None, metavar="DURATION",
              help="Time budget of this run: no new commit group starts after it; work under way commits and "
                   "the rest is reported skipped for the next run (default: the profile's max_runtime).")
@click.option("--require-signature", is_flag=True,
              help="Refuse a plan file not signed (`plan --sign`) with the key in COMPACTOR_PLAN_KEY.")
@fail_on_empty_option
@debug_option
@handle_errors
def command(plan_file: Path | None, project_dir: Path, profiles_dir: Path | None, target: str | None,
            vars_text: str | None, select: tuple[str, ...], exclude: tuple[str, ...], auto_approve: bool,
            dry_run: bool, fail_fast: bool, replan_stale: bool, fmt: str, metrics: Path | None, watch: str | None,
            max_runtime: str | None, require_signature: bool, fail_on_empty: bool, debug: bool) -> int:
    """Apply PLAN_FILE exactly (from `compactor plan --out`), or plan and apply now."""
    from compactor import api
    from compactor.cli.common import echo_json
    from compactor.errors import UsageError
    from compactor.output.apply_render import ProgressPrinter, render_run
    from compactor.output.text import console as make_console

    options = build_options(project_dir, profiles_dir, target, vars_text, select, exclude)
    prepare_output(metrics, "--metrics")
    key = None
    if require_signature:
        if plan_file is None:
            raise UsageError("--require-signature applies a saved, signed plan file",
                             hint="compactor plan --sign --out plan.json, then compactor apply plan.json "
                                  "--require-signature")
        key = plan_key("--require-signature")
    plan_obj = None
    if plan_file is not None:  # a saved plan is applied with the target it was made for
        plan_obj = api.load_plan(plan_file, require_key=key)
        options = api.options_for_plan(options, plan_obj, plan_file)
    compiled = api.compile_project(options)
    lean_imports(compiled.target)
    if plan_file is None:
        from compactor.output.plan_render import render_text

        if check_selection(options, compiled.policies, compiled.all_policies, fail_on_empty):
            return exit_codes.FAILURE
        plan_obj = api.plan(options, compiled=compiled)
        console = make_console(stderr=True)
        render_text(plan_obj, console, advice=advice(compiled.target, project_dir, target))
        failed = [t.name for t in plan_obj.tables if t.error]
        if not plan_obj.has_changes:
            if failed:
                click.echo(f"Nothing to apply, but {len(failed)} table(s) could not be planned: {', '.join(failed)}",
                           err=True)
                return exit_codes.FAILURE
            click.echo("No changes. Nothing to apply.")
            return exit_codes.OK
        if not (auto_approve or dry_run):
            if not sys.stdin.isatty():
                raise UsageError("refusing to apply an unreviewed plan without a terminal",
                                 hint="pass --auto-approve, or run `compactor plan --out plan.json` and apply that file")
            if not click.confirm("Apply this plan?", default=False):
                click.echo("Apply cancelled.")
                return exit_codes.OK
    printer = ProgressPrinter(make_console(stderr=True))
    with _graceful_interrupt() as stop:
        run = api.apply(options, plan_file=plan_file, plan_obj=plan_obj, dry_run=dry_run, fail_fast=fail_fast,
                        require_key=key, compiled=compiled,
                        replan_stale=replan_stale, progress=printer, watch_s=_seconds(watch, "--watch"),
                        max_runtime_s=_seconds(max_runtime, "--max-runtime"), stop=stop)
    if metrics is not None:
        from compactor.output.metrics import write_metrics

        write_metrics(metrics, run=run)
    if fmt == "json":
        echo_json(run.to_dict())
    else:
        render_run(run, make_console(), shown=printer.shown)
    if run.interrupted:
        return exit_codes.INTERRUPTED
    return exit_codes.OK if run.ok else exit_codes.FAILURE


@contextlib.contextmanager
def _graceful_interrupt() -> Iterator[threading.Event]:
    """The first Ctrl-C asks the run to stop after the commit group under way (as Terraform's first Ctrl-C);
    a second one stops it at once (KeyboardInterrupt). Either way the run is recorded as interrupted."""
    stop = threading.Event()
    if threading.current_thread() is not threading.main_thread():
        yield stop
        return

    def first(signum: int, frame: object) -> None:
        click.echo("Interrupt received: finishing the commit group under way, then stopping (the rest is left "
                   "for the next run); Ctrl-C again stops at once", err=True)
        stop.set()
        signal.signal(signal.SIGINT, signal.default_int_handler)

    previous = signal.signal(signal.SIGINT, first)
    try:
        yield stop
    finally:
        signal.signal(signal.SIGINT, previous)


def _seconds(value: str | None, option: str) -> float | None:
    """A duration option (``90``, ``30m``, ``2h``) in seconds; None when not given."""
    from compactor.errors import UsageError
    from compactor.units import UnitError, parse_duration

    if value is None:
        return None
    try:
        return float(parse_duration(int(value) if value.strip().isdigit() else value))
    except UnitError as e:
        raise UsageError(f"{option}: {e}") from None
