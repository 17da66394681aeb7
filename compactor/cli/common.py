"""Options shared by all commands and the one place errors become exit codes."""

from __future__ import annotations

import functools
import json
import logging
import sys
import traceback
from pathlib import Path
from typing import Any, Callable

import click
import yaml

from compactor.project.model import ProjectOptions
from compactor.cli import exit_codes
from compactor.errors import CompactorError, UsageError
from compactor.runtime.storage import install_log_redaction, redact


def _parse_vars(text: str | None) -> dict[str, Any]:
    if not text:
        return {}
    try:
        value = yaml.safe_load(text)
    except yaml.YAMLError as e:
        raise UsageError(f"--vars is not valid YAML/JSON: {e}") from None
    if not isinstance(value, dict):
        raise UsageError("--vars must be a mapping, e.g. --vars '{lookback_days: 3}'")
    return value


def project_options(f: Callable) -> Callable:
    """Decorator adding --project-dir, --profiles-dir, --target, --vars, --select, --exclude."""
    opts = [
        click.option("--project-dir", type=click.Path(file_okay=False, path_type=Path),
                     default=Path("."), show_default=True, help="Directory with compactor.yml."),
        click.option("--profiles-dir", type=click.Path(file_okay=False, path_type=Path),
                     default=None, help="Directory with profiles.yml (default: project dir, then ~/.compactor)."),
        click.option("--target", "-t", default=None, help="Profile target to use (default: the profile's target)."),
        click.option("--vars", "vars_text", default=None, help="YAML/JSON mapping overriding project vars."),
        click.option("--select", "-s", multiple=True,
                     help="Select tables: NAME, tag:X, path:GLOB, format:delta (repeatable; space-separated OR)."),
        click.option("--exclude", multiple=True, help="Exclude tables (same syntax as --select)."),
    ]
    for o in reversed(opts):
        f = o(f)
    return f


def build_options(project_dir: Path, profiles_dir: Path | None, target: str | None,
                  vars_text: str | None, select: tuple[str, ...], exclude: tuple[str, ...]) -> ProjectOptions:
    def split(values: tuple[str, ...]) -> tuple[str, ...]:
        return tuple(tok for v in values for tok in v.split())

    return ProjectOptions(
        project_dir=project_dir, profiles_dir=profiles_dir, target=target,
        vars=_parse_vars(vars_text), select=split(select), exclude=split(exclude),
    )


debug_option = click.option("--debug", is_flag=True, help="Show tracebacks for internal errors.")


def handle_errors(f: Callable) -> Callable:
    """Run a command body; map CompactorError to a clear message and exit 2 (usage) or the error's
    exit code, and unexpected exceptions to an internal error (traceback only with --debug)."""

    @functools.wraps(f)
    def wrapper(*args: Any, **kwargs: Any) -> Any:
        debug = kwargs.get("debug", False)
        logging.basicConfig(level=logging.DEBUG if debug else logging.WARNING,
                            format="%(levelname)s %(name)s: %(message)s")
        install_log_redaction()  # storage option values never reach a log line
        try:
            code = f(*args, **kwargs)
        except click.exceptions.Exit:
            raise
        except click.ClickException:
            raise
        except CompactorError as e:
            click.echo(f"Error: {redact(e.message)}", err=True)
            if e.hint:
                click.echo(f"Hint: {redact(e.hint)}", err=True)
            if debug:
                click.echo(redact(traceback.format_exc()), err=True)
            sys.exit(getattr(e, "exit_code", exit_codes.USAGE))
        except KeyboardInterrupt:
            click.echo("Interrupted.", err=True)
            sys.exit(130)
        except Exception as e:  # noqa: BLE001 - the last line of defence
            if debug:
                click.echo(redact(traceback.format_exc()), err=True)
            click.echo(redact(f"Internal error: {type(e).__name__}: {e}"), err=True)
            click.echo("Run again with --debug for a traceback; please report it.", err=True)
            sys.exit(exit_codes.USAGE)
        sys.exit(code or 0)

    return wrapper


def echo_json(data: Any) -> None:
    click.echo(json.dumps(data, indent=2, sort_keys=False, default=str))
