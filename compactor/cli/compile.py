"""`compactor compile`: the Spark settings and readStream/writeStream options each policy that asks
something of its table's writer (a streaming writer's) asks of it."""

from __future__ import annotations

from dataclasses import asdict, dataclass
from pathlib import Path

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
from compactor.policy.build import writer_settings_formats
from compactor.policy.model import TablePolicy


@click.command("compile")
@project_options
@click.option("--format", "fmt", type=click.Choice(["text", "json"]), default="text", show_default=True)
@click.option("--explain", is_flag=True,
              help="Also print every selected policy's settings and where each came from (table, namespace, "
                   "catalog, file or project defaults).")
@fail_on_empty_option
@debug_option
@handle_errors
def command(project_dir: Path, profiles_dir: Path | None, target: str | None, vars_text: str | None,
            select: tuple[str, ...], exclude: tuple[str, ...], fmt: str, explain: bool, fail_on_empty: bool,
            debug: bool) -> int:
    """Print per streaming policy the writer settings (compactInterval, minBatchesToRetain, cleanupDelay,
    retention); with --explain, every selected policy's settings and the layer each comes from."""
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
    explained = [_explain(p) for p in compiled.policies] if explain else None
    if fmt == "json":
        echo_json({"streaming_policies": [s.to_dict() for s in settings],
                   **({"policies": [asdict(e) for e in explained]} if explained is not None else {})})
        return exit_codes.OK
    for e in explained or ():
        click.echo(f"{e.name}  ({e.source})")
        for item in e.values:
            click.echo(f"  {item.key} = {item.value}  [{item.layer}: {item.at}]")
    if not settings and not explain:
        click.echo(f"No {' or '.join(writer_settings_formats())} policies selected.")
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



@dataclass(frozen=True)
class _Value:
    """One declared setting of a policy: its dotted key, its value, the merge layer and file:line:col."""

    key: str
    value: object
    layer: str
    at: str


@dataclass(frozen=True)
class _Explained:
    """One policy as `compile --explain` shows it: its name, where it starts, and its declared settings."""

    name: str
    source: str
    values: list[_Value]


def _explain(p: TablePolicy) -> _Explained:
    """A policy's declared settings, each with the merge layer and the file:line:col it comes from."""
    return _Explained(p.name, str(p.source), [_Value(k, v, p.location(k).layer or "table", str(p.location(k)))
                                             for k, v in sorted(p.declared.items()) if k != "name"])
