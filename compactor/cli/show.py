"""`compactor show PLAN`: render a saved plan (as `terraform show`)."""

from __future__ import annotations

import json
from pathlib import Path

import click

from compactor.cli import exit_codes
from compactor.cli.common import debug_option, handle_errors


@click.command("show")
@click.argument("plan_file", type=click.Path(dir_okay=False, path_type=Path))
@click.option("--format", "fmt", type=click.Choice(["text", "markdown", "json"]), default="text", show_default=True)
@click.option("--partitions", is_flag=True, help="List every partition and skip, not a summary.")
@debug_option
@handle_errors
def command(plan_file: Path, fmt: str, partitions: bool, debug: bool) -> int:
    """Render a plan file written by `compactor plan --out` (its digest checked: an edited plan is refused)."""
    from compactor import api
    from compactor.output.plan_render import render_markdown, render_text
    from compactor.output.text import console
    from compactor.planning.plan import plan_to_dict

    plan = api.load_plan(plan_file)
    if fmt == "json":
        click.echo(json.dumps({**plan_to_dict(plan), "digest": plan.digest}, indent=2))
    elif fmt == "markdown":
        click.echo(render_markdown(plan))
    else:
        render_text(plan, console(), partitions=partitions)
    return exit_codes.OK
