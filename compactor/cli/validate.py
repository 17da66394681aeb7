"""`compactor validate`: render and validate every policy; report every problem at once."""

from __future__ import annotations

import json
from pathlib import Path
from typing import TYPE_CHECKING

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

if TYPE_CHECKING:  # pragma: no cover
    from compactor.project.compile import ValidationResult


def _read(result: ValidationResult) -> str:
    """What was read: the policy files and the dbt manifest, named apart."""
    from compactor.output.text import plural

    dbt = result.project is not None and result.project.dbt is not None
    files = len(result.files) - (1 if dbt else 0)  # the manifest is the last of ``files``
    manifest = f"the dbt manifest {result.files[-1]}" if dbt else ""
    if dbt and not files:
        return manifest
    return plural(files, "policy file") + (f" and {manifest}" if dbt else "")


def _declared(result: ValidationResult) -> str:
    """What the policies declare, by kind: a discover entry names a folder or namespace whose tables are
    found at plan time, a dbt node is one table."""
    from compactor.output.text import plural

    kinds = {"by path": 0, "discover": 0, "by catalog name": 0, "dbt node": 0}
    for p in result.all_policies:
        kind = ("dbt node" if p.dbt is not None else "discover" if p.discover is not None
                else "by catalog name" if p.catalog is not None or p.path is None else "by path")
        kinds[kind] += 1
    shown = {"by path": plural(kinds["by path"], "table") + " by path",
             "discover": plural(kinds["discover"], "discover entry", "discover entries") + " (tables found at plan time)",
             "by catalog name": plural(kinds["by catalog name"], "table") + " by catalog name",
             "dbt node": plural(kinds["dbt node"], "dbt node")}
    parts = [shown[k] for k, n in kinds.items() if n]
    return ", ".join(parts) if parts else "no tables"


@click.command("validate")
@project_options
@click.option("--format", "fmt", type=click.Choice(["text", "json", "github"]), default="text",
              show_default=True, help="github: workflow-command annotations for pull-request checks.")
@fail_on_empty_option
@debug_option
@handle_errors
def command(project_dir: Path, profiles_dir: Path | None, target: str | None, vars_text: str | None,
            select: tuple[str, ...], exclude: tuple[str, ...], fmt: str, fail_on_empty: bool, debug: bool) -> int:
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
        click.echo(f"{status}: {_read(result)}; {_declared(result)}; {plural(n_err, 'error')}, "
                   f"{plural(n_warn, 'warning')}")
    if not result.ok:
        return exit_codes.FAILURE
    if check_selection(options, result.policies, result.all_policies, fail_on_empty):
        return exit_codes.FAILURE
    return exit_codes.OK
