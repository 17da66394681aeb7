"""`compactor validate`: render and validate every policy; report every problem at once."""

from __future__ import annotations

import json

import click

from compactor.cli import exit_codes
from compactor.cli.common import (
    build_options,
    check_selection,
    debug_option,
    fail_on_empty_option,
    handle_errors,
    project_options,
)


@click.command("validate")
@project_options
@click.option("--format", "fmt", type=click.Choice(["text", "json", "github"]), default="text",
              show_default=True, help="github: workflow-command annotations for pull-request checks.")
@fail_on_empty_option
@debug_option
@handle_errors
def command(project_dir, profiles_dir, target, vars_text, select, exclude, fmt, fail_on_empty, debug) -> int:
    """Validate policies against the schema and semantic rules (exit 0 valid, 1 invalid, 2 usage)."""
    from compactor import api
    from compactor.output.text import plural

    options = build_options(project_dir, profiles_dir, target, vars_text, select, exclude)
    result = api.validate(options)
    if fmt == "json":
        click.echo(json.dumps(result.to_dict(), indent=2))
    elif fmt == "github":
        for d in result.diagnostics:
            click.echo(d.github())
    else:
        for d in result.diagnostics:
            click.echo(str(d), err=False)
        n_err, n_warn = len(result.errors), len(result.warnings)
        status = "OK" if result.ok else "FAILED"
        click.echo(f"{status}: {plural(len(result.files), 'file')}, {plural(len(result.all_policies), 'table')}, "
                   f"{plural(n_err, 'error')}, {plural(n_warn, 'warning')}")
    if not result.ok:
        return exit_codes.FAILURE
    if check_selection(options, result.policies, result.all_policies, fail_on_empty):
        return exit_codes.FAILURE
    return exit_codes.OK
