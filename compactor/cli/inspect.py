"""`compactor inspect PATH`: health report of a table of any format, or of the logs at a path that holds none."""

from __future__ import annotations

from pathlib import Path

import click

from compactor.cli import exit_codes
from compactor.cli.common import debug_option, echo_json, handle_errors


@click.command("inspect")
@click.argument("path")
@click.option("--format", "fmt", type=click.Choice(["text", "json"]), default="text", show_default=True)
@click.option("--policy-project", type=click.Path(file_okay=False, path_type=Path), default=None, hidden=True,
              help="Deprecated: --project-dir.")
@click.option("--table", default=None,
              help="Compare against this table's policy in --project-dir (PATH may then be omitted as '-').")
@click.option("--horizon", type=click.IntRange(min=1), default=None,
              help="How many of the newest commits to scan for duplicate rewrites, in a log that can hold them "
                   "(default 1000).")
@click.option("--project-dir", type=click.Path(file_okay=False, path_type=Path), default=Path("."), show_default=True,
              help="The project: its policies (a table name as PATH, --table) and its target's credentials.")
@click.option("--profiles-dir", type=click.Path(file_okay=False, path_type=Path), default=None,
              help="Directory with profiles.yml (default: project dir, then ~/.compactor).")
@click.option("--target", "-t", "target_name", default=None, help="Profile target (default: the profile's target).")
@debug_option
@handle_errors
def command(path: str, fmt: str, policy_project: Path | None, table: str | None, horizon: int | None,
            project_dir: Path, profiles_dir: Path | None, target_name: str | None, debug: bool) -> int:
    """Health report of PATH (a table's location, or the name of a table of the project): files and size
    histogram per partition, small-file share, manifest/log growth, and what the table's format warns of
    (rows live twice, writers' auto compaction racing compactor). Under a policy (a table name, or --table) it reports the planner's own
    decisions for the table, as `compactor plan` would make them."""
    from compactor import api
    from compactor.project.model import ProjectOptions

    if policy_project is not None:
        click.echo("Warning: --policy-project is deprecated: use --project-dir", err=True)
        project_dir = policy_project
    options = ProjectOptions(project_dir=project_dir, profiles_dir=profiles_dir, target=target_name)
    report = api.inspect(path, options=options, table=table, horizon=horizon)
    if fmt == "json":
        echo_json(report.to_dict())
    else:
        from compactor.output.inspect_text import render_inspect_text

        click.echo(render_inspect_text(report))
    return exit_codes.OK
