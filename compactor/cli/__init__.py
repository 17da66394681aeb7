"""The `compactor` command line: thin commands that call compactor.api and render results.

Subcommands live in their own modules and are imported only when invoked, so `compactor validate`
stays fast and never imports pyspark.
"""

from __future__ import annotations

import importlib

import click

from compactor import __version__

# command name -> module under compactor.cli (each module defines `command`)
COMMANDS = {
    "validate": "validate",
    "compile": "compile",
    "plan": "plan",
    "apply": "apply",
    "inspect": "inspect",
    "init": "init",
    "demo": "demo",
    "history": "history",
    "report": "report",
    "schema": "schema",
    "repair": "repair",
    "ls": "ls",
    "show": "show",
    "debug": "debug",
}


class LazyGroup(click.Group):
    def list_commands(self, ctx: click.Context) -> list[str]:
        return sorted(COMMANDS)

    def get_command(self, ctx: click.Context, name: str) -> click.Command | None:
        module = COMMANDS.get(name)
        if module is None:
            return None
        try:
            mod = importlib.import_module(f"compactor.cli.{module}")
        except ModuleNotFoundError as e:  # command not built yet
            if e.name == f"compactor.cli.{module}":
                return None
            raise
        command: click.Command = mod.command  # each module under compactor.cli defines `command`
        return command

    def resolve_command(self, ctx: click.Context, args: list[str]) -> tuple[str | None, click.Command | None, list[str]]:
        """A mistyped command (``compactor plna``) is a usage error that names the closest one."""
        import difflib

        name = args[0] if args else ""
        if args and name not in COMMANDS and not name.startswith("-"):
            close = difflib.get_close_matches(name, list(COMMANDS), n=1, cutoff=0.5)
            if close:
                raise click.UsageError(f"No such command '{name}'. Did you mean '{close[0]}'?", ctx)
        return super().resolve_command(ctx, args)


@click.group(cls=LazyGroup, context_settings={"help_option_names": ["-h", "--help"]})
@click.version_option(__version__, prog_name="compactor")
def cli() -> None:
    """compactor: declarative compaction policies for Spark lakehouse tables."""


def main() -> None:
    """Run the command line; ends with SystemExit, as a click program does (for callers embedding it)."""
    from compactor.runtime.pyarrow_pandas import defer_pandas

    defer_pandas()
    cli(prog_name="compactor")


def run() -> None:
    """The ``compactor`` program (its console script and ``python -m compactor``): ``main()``, then the
    process ends without the interpreter's teardown (compactor/runtime/exit.py)."""
    from compactor.runtime.exit import exit_without_teardown

    try:
        main()
    except SystemExit as done:
        exit_without_teardown(done)
