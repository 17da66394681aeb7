"""`compactor init [DIR]`: scaffold compactor.yml, profiles.yml and an example policy."""

from __future__ import annotations

from pathlib import Path

import click

from compactor.cli.common import debug_option, handle_errors


@click.command("init")
@click.argument("directory", type=click.Path(file_okay=False, path_type=Path), default=Path("."))
@debug_option
@handle_errors
def command(directory: Path, debug: bool) -> int:
    """Scaffold a new compactor project in DIRECTORY (default: current directory)."""
    from compactor import api

    for path in api.init(directory):
        click.echo(f"created {path}")
    click.echo("next: edit policies/example.yml, then run `compactor validate`")
    return 0
