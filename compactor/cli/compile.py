"""`compactor compile`: the Spark settings and writeStream options each streaming (file-sink) policy
asks of its writer."""

from __future__ import annotations

import click

from compactor.cli import exit_codes
from compactor.cli.common import (
    build_options,
    check_selection,
    debug_option,
    echo_json,
    fail_on_empty_option,
    handle_errors,
    project_options,
)


@click.command("compile")
@project_options
@click.option("--format", "fmt", type=click.Choice(["text", "json"]), default="text", show_default=True)
@fail_on_empty_option
@debug_option
@handle_errors
def command(project_dir, profiles_dir, target, vars_text, select, exclude, fmt, fail_on_empty, debug) -> int:
    """Print per streaming policy the writer settings (compactInterval, minBatchesToRetain, cleanupDelay,
    sink retention)."""
    from compactor import api
    from compactor.errors import PolicyError

    options = build_options(project_dir, profiles_dir, target, vars_text, select, exclude)
    compiled = api.compile_project(options)
    errors = [d for d in compiled.diagnostics if getattr(d, "severity", "error") == "error"]
    if errors:
        for d in errors:
            click.echo(str(d), err=True)
        raise PolicyError(f"{len(errors)} policy error(s): run `compactor validate`")
    if check_selection(options, compiled.policies, compiled.all_policies, fail_on_empty):
        return exit_codes.FAILURE
    settings = api.writer_settings(options, compiled=compiled)
    if fmt == "json":
        echo_json({"streaming_policies": [s.to_dict() for s in settings]})
        return exit_codes.OK
    if not settings:
        click.echo("No spark_file_sink policies selected.")
    for s in settings:
        click.echo(f"{s.table}  ({s.path})")
        for k, v in s.spark_conf.items():
            click.echo(f'  spark.conf.set("{k}", "{v}")')
        for k, v in s.read_stream_options.items():
            click.echo(f'  .readStream.option("{k}", "{v}")')
        for k, v in s.write_stream_options.items():
            click.echo(f'  .writeStream.option("{k}", "{v}")')
        for n in s.notes:
            click.echo(f"  # {n}")
    return exit_codes.OK
