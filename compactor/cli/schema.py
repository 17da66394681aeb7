"""`compactor schema [NAME]`: print a JSON Schema shipped with compactor (for editors and CI)."""

from __future__ import annotations

import click

from compactor.cli import exit_codes
from compactor.cli.common import debug_option, handle_errors

SCHEMAS = {"policy": "policy.schema.json", "project": "project.schema.json", "profiles": "profiles.schema.json",
           "plan": "plan.schema.json", "run_results": "run_results.schema.json"}


@click.command("schema")
@click.argument("name", type=click.Choice(sorted(SCHEMAS)), default="policy")
@debug_option
@handle_errors
def command(name: str, debug: bool) -> int:
    """Print the JSON Schema of NAME (default: policy files), e.g. for an editor:
    `compactor schema > schemas/policy.schema.json`."""
    from compactor.project.scaffold import schema_text

    click.echo(schema_text(SCHEMAS[name]), nl=False)
    return exit_codes.OK
