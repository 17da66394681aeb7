"""`compactor inspect PATH`: health report of a Delta table, a file-sink output or a checkpoint."""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path

import click

from compactor.cli import exit_codes
from compactor.cli.common import debug_option, echo_json, handle_errors


def _policy_settings(project_dir: Path, table: str) -> dict:
    from compactor.errors import UsageError
    from compactor.project.compile import compile_project
    from compactor.project.model import ProjectOptions

    compiled = compile_project(ProjectOptions(project_dir=project_dir))
    pol = next((p for p in compiled.all_policies if p.name == table), None)
    if pol is None:
        raise UsageError(f"table {table!r} is not declared in {project_dir}")
    s = pol.sink
    out: dict[str, int | None] = {"min_file_size": pol.compaction.min_file_size}
    if s is not None:
        out.update(compact_interval=s.compact_interval, min_batches_to_retain=s.min_batches_to_retain,
                   retention=s.retention)
    return out


@click.command("inspect")
@click.argument("path")
@click.option("--format", "fmt", type=click.Choice(["text", "json"]), default="text", show_default=True)
@click.option("--policy-project", type=click.Path(file_okay=False, path_type=Path), default=None,
              help="Project directory whose policy for --table the report compares against.")
@click.option("--table", default=None, help="Table name in --policy-project.")
@click.option("--horizon", type=click.IntRange(min=1), default=None,
              help="Delta: how many of the newest commits to scan for duplicate rewrites (default 1000).")
@click.option("--project-dir", type=click.Path(file_okay=False, path_type=Path), default=Path("."), show_default=True,
              help="Project whose profile target gives the storage options for an s3://, az://, gs:// PATH.")
@click.option("--profiles-dir", type=click.Path(file_okay=False, path_type=Path), default=None,
              help="Directory with profiles.yml (default: project dir, then ~/.compactor).")
@click.option("--target", "-t", "target_name", default=None, help="Profile target (default: the profile's target).")
@debug_option
@handle_errors
def command(path, fmt, policy_project, table, horizon, project_dir, profiles_dir, target_name, debug) -> int:
    """Health report: files and size histogram per partition, small-file share, manifest/log growth, and
    for Delta tables duplicate rewrites in the log (rows live twice) and auto-compaction warnings."""
    from compactor.errors import UsageError
    from compactor.tasks.inspect import inspect_path

    if (policy_project is None) != (table is None):
        raise UsageError("--policy-project and --table go together (the policy of TABLE in that project)")
    policy = _policy_settings(policy_project, table) if policy_project and table else None
    storage_options: Mapping[str, str] = {}
    if "://" in path and not path.startswith("file:"):
        from compactor import api
        from compactor.project.model import ProjectOptions

        storage_options = api.target_storage_options(ProjectOptions(project_dir=project_dir, profiles_dir=profiles_dir,
                                                                    target=target_name))
    report = inspect_path(path, storage_options, policy=policy, horizon=horizon)
    if fmt == "json":
        echo_json(report.to_dict())
    else:
        from compactor.output.inspect_text import render_inspect_text

        click.echo(render_inspect_text(report))
    return exit_codes.OK
