"""`compactor inspect PATH`: health report of a Delta table, a file-sink output or a checkpoint."""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import Any

import click

from compactor.cli import exit_codes
from compactor.cli.common import debug_option, echo_json, handle_errors


def _policy(project_dir: Path, profiles_dir: Path | None, target: str | None, table: str) -> tuple[object, dict[str, Any]]:
    """The named table's policy in the project (its path resolved) and the settings inspect compares."""
    from compactor.errors import UsageError
    from compactor.project.compile import compile_project
    from compactor.project.model import ProjectOptions
    from compactor.tasks.plan import expand_policies

    compiled = compile_project(ProjectOptions(project_dir=project_dir, profiles_dir=profiles_dir, target=target))
    pols = expand_policies(compiled.all_policies, compiled.project.root, compiled.target.storage_options, {})
    pol = next((p for p in pols if p.name == table), None)
    if pol is None:
        raise UsageError(f"table {table!r} is not declared in {project_dir}",
                         hint="`compactor ls --project-dir DIR` lists the project's tables")
    s = pol.sink
    out: dict[str, int | None] = {"min_file_size": pol.compaction.min_file_size}
    if s is not None:
        out.update(compact_interval=s.compact_interval, min_batches_to_retain=s.min_batches_to_retain,
                   retention=s.retention)
    return pol, out


@click.command("inspect")
@click.argument("path")
@click.option("--format", "fmt", type=click.Choice(["text", "json"]), default="text", show_default=True)
@click.option("--policy-project", type=click.Path(file_okay=False, path_type=Path), default=None, hidden=True,
              help="Deprecated: --project-dir.")
@click.option("--table", default=None,
              help="Compare against this table's policy in --project-dir (PATH may then be omitted as '-').")
@click.option("--horizon", type=click.IntRange(min=1), default=None,
              help="Delta: how many of the newest commits to scan for duplicate rewrites (default 1000).")
@click.option("--project-dir", type=click.Path(file_okay=False, path_type=Path), default=Path("."), show_default=True,
              help="The project: its policies (a table name as PATH, --table) and its target's credentials.")
@click.option("--profiles-dir", type=click.Path(file_okay=False, path_type=Path), default=None,
              help="Directory with profiles.yml (default: project dir, then ~/.compactor).")
@click.option("--target", "-t", "target_name", default=None, help="Profile target (default: the profile's target).")
@debug_option
@handle_errors
def command(path, fmt, policy_project, table, horizon, project_dir, profiles_dir, target_name, debug) -> int:
    """Health report of PATH (a table's location, or the name of a table of the project): files and size
    histogram per partition, small-file share, manifest/log growth; for Delta tables rows live twice and
    auto-compaction warnings. Under a policy (a table name, or --table) it reports the planner's own
    decisions for the table, as `compactor plan` would make them."""
    from compactor.tasks.inspect import inspect_path

    if policy_project is not None:
        click.echo("Warning: --policy-project is deprecated: use --project-dir", err=True)
        project_dir = policy_project
    if table is None and "/" not in path and "://" not in path and not Path(path).exists():
        table = path  # a table name of the project
    pol, policy = _policy(project_dir, profiles_dir, target_name, table) if table else (None, None)
    if pol is not None and (path in ("-", table) or not Path(path).exists() and "://" not in path):
        path = pol.path or path  # type: ignore[attr-defined]
    storage_options: Mapping[str, str] = {}
    if "://" in path and not path.startswith("file:"):
        from compactor import api
        from compactor.project.model import ProjectOptions

        storage_options = api.target_storage_options(ProjectOptions(project_dir=project_dir, profiles_dir=profiles_dir,
                                                                    target=target_name))
    report = inspect_path(path, storage_options, policy=policy, horizon=horizon, table_policy=pol)
    if fmt == "json":
        echo_json(report.to_dict())
    else:
        from compactor.output.inspect_text import render_inspect_text

        click.echo(render_inspect_text(report))
    return exit_codes.OK
