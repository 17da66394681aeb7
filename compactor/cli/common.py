"""Options shared by all commands and the one place errors become exit codes."""

from __future__ import annotations

import contextlib
import functools
import json
import logging
import os
import sys
import traceback
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import click
import yaml

from compactor.cli import exit_codes
from compactor.errors import CompactorError, UsageError
from compactor.models.formats import DEFAULT_FORMAT
from compactor.project.model import ProjectOptions, Target
from compactor.runtime.secrets import install_log_redaction, redact


def _parse_vars(text: str | None) -> dict[str, Any]:
    if not text:
        return {}
    try:
        value = yaml.safe_load(text)
    except yaml.YAMLError as e:
        raise UsageError(f"--vars is not valid YAML/JSON: {_yaml_problem(e)}",
                         hint="a mapping, e.g. --vars '{lookback_days: 3, lake_root: s3://bucket/lake}'") from None
    if not isinstance(value, dict):
        raise UsageError("--vars must be a mapping, e.g. --vars '{lookback_days: 3}'")
    return value


def _yaml_problem(e: yaml.YAMLError) -> str:
    """PyYAML's error in one line: what it found, and at which column of the value (its own text spans four
    lines and quotes the value back)."""
    if isinstance(e, yaml.MarkedYAMLError) and e.problem:
        mark = e.problem_mark
        return f"{e.problem}" + (f" at character {mark.column + 1}" if mark is not None and mark.line == 0 else "")
    return " ".join(str(e).split())


def project_options(f: Callable[..., Any]) -> Callable[..., Any]:
    """Decorator adding --project-dir, --profiles-dir, --target, --vars, --select, --exclude."""
    opts = [
        click.option("--project-dir", type=click.Path(file_okay=False, path_type=Path),
                     default=Path("."), show_default=True, help="Directory with compactor.yml."),
        click.option("--profiles-dir", type=click.Path(file_okay=False, path_type=Path),
                     default=None, help="Directory with profiles.yml (default: project dir, then ~/.compactor)."),
        click.option("--target", "-t", default=None, help="Profile target to use (default: the profile's target)."),
        click.option("--vars", "vars_text", default=None, help="YAML/JSON mapping overriding project vars."),
        click.option("--select", "-s", multiple=True,
                     help=f"Select tables: NAME, tag:X, path:GLOB, format:{DEFAULT_FORMAT} (repeatable; space-separated OR)."),
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


fail_on_empty_option = click.option(
    "--fail-on-empty", is_flag=True,
    help="Exit 1 when --select/--exclude leave no table (default: warn and exit 0, as dbt does).")


def check_selection(options: ProjectOptions, selected: Sequence[Any], all_policies: Sequence[Any],
                    fail_on_empty: bool) -> bool:
    """dbt's behaviour for a selection that matches nothing: a warning per criterion that matches no
    table, "Nothing to do", exit 0. Returns True when the command must stop with exit 1 instead
    (--fail-on-empty)."""
    from compactor.project.selection import select_policies, suggest_selector

    for sel in options.select:
        if not select_policies(all_policies, [sel]):
            close = suggest_selector(all_policies, sel)
            click.echo(f"Warning: the selection criterion '{sel}' does not match any table"
                       + (f"; did you mean '{close}'?" if close else ""), err=True)
    if selected:
        return False
    if fail_on_empty:
        click.echo("Error: no table selected (--fail-on-empty)", err=True)
        click.echo("Hint: check the names, tags and paths in your policies and the --select/--exclude "
                   "arguments", err=True)
        return True
    click.echo("Warning: nothing to do: no table selected. Check the names, tags and paths in your policies "
               "and the --select/--exclude arguments (--fail-on-empty makes this exit 1)", err=True)
    return False


debug_option = click.option("--debug", is_flag=True, help="Show tracebacks for internal errors.")


class _NoTracebackFormatter(logging.Formatter):
    """Log records without their traceback: tracebacks are for --debug only."""

    def format(self, record: logging.LogRecord) -> str:
        saved = record.exc_info, record.exc_text, record.stack_info
        record.exc_info = record.exc_text = record.stack_info = None
        try:
            return super().format(record)
        finally:
            record.exc_info, record.exc_text, record.stack_info = saved


def lean_imports(target: Target) -> None:
    """A command whose target runs no Spark loads pyarrow without numpy (compactor/runtime/pyarrow_numpy.py)."""
    if not target.runs_spark:
        from compactor.runtime.pyarrow_numpy import defer_numpy

        defer_numpy()


def _configure_logging(debug: bool) -> None:
    fmt = "%(levelname)s %(name)s: %(message)s"
    logging.basicConfig(level=logging.DEBUG if debug else logging.WARNING, format=fmt)
    if not debug:
        for h in logging.getLogger().handlers:
            h.setFormatter(_NoTracebackFormatter(fmt))
    _show_progress()


class _ProgressHandler(logging.Handler):
    """Writes each record to a duplicate of descriptor 2 made when the command started, or, where
    sys.stderr has no descriptor (a caller's StringIO, click's test runner), to sys.stderr as it is then."""

    def __init__(self) -> None:
        super().__init__(logging.INFO)
        self.own: Any = None
        try:
            sys.stderr.flush()
            self.own = os.fdopen(os.dup(sys.stderr.fileno()), "w", buffering=1, encoding="utf-8", errors="replace")
        except (AttributeError, OSError, ValueError):
            self.own = None

    def emit(self, record: logging.LogRecord) -> None:
        try:
            stream = self.own or sys.stderr
            stream.write(self.format(record) + "\n")
            stream.flush()
        except Exception:  # noqa: BLE001 - a progress line must never fail the command
            pass

    def close(self) -> None:
        if self.own is not None:
            with contextlib.suppress(OSError):
                self.own.close()
            self.own = None
        super().close()


#: the handler that shows the library's progress lines (runtime/progress.py); one per process
_progress_handler: logging.Handler | None = None


def _show_progress() -> None:
    """Progress lines go to the terminal's stderr as they are, through a duplicate of descriptor 2 made now:
    a JVM's launch points descriptor 2 at target/spark.log for its duration, and that is when a "still
    starting Spark" line matters most."""
    global _progress_handler
    from compactor.runtime.progress import LOGGER

    logger = logging.getLogger(LOGGER)
    if _progress_handler is not None:
        logger.removeHandler(_progress_handler)
        _progress_handler.close()
    _progress_handler = _ProgressHandler()
    _progress_handler.setFormatter(logging.Formatter("%(message)s"))
    logger.addHandler(_progress_handler)
    logger.setLevel(logging.INFO)
    logger.propagate = False


def prepare_output(path: Path | None, option: str) -> Path | None:
    """Create the folders an output file goes into (as Terraform's `plan -out` and dbt's target path
    do) before any work starts; a path that cannot be written is a usage error, not a traceback."""
    if path is None:
        return None
    if path.is_dir():
        raise UsageError(f"{option} {path} is a folder; give a file name")
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
    except OSError as e:
        raise UsageError(f"cannot create the folder for {option} {path}: {e.strerror or e}") from None
    return path


def _os_error_message(e: OSError) -> str:
    where = " -> ".join(str(p) for p in (e.filename, e.filename2) if p is not None)
    return f"{e.strerror or type(e).__name__}{': ' + where if where else ''}"


def handle_errors(f: Callable[..., Any]) -> Callable[..., Any]:
    """Run a command body; map CompactorError to a clear message and exit 2 (usage) or the error's
    exit code, an OSError (a file that cannot be read or written) to a clear message and exit 2, and
    unexpected exceptions to an internal error (traceback only with --debug)."""

    @functools.wraps(f)
    def wrapper(*args: Any, **kwargs: Any) -> Any:
        debug = kwargs.get("debug", False)
        _configure_logging(debug)
        spark_log = None
        if not debug and "COMPACTOR_SPARK_LOG" not in os.environ:
            # Spark's and Ivy's output goes to the project's target/spark.log, not between compactor's lines
            spark_log = str(Path(kwargs.get("project_dir") or ".") / "target" / "spark.log")
            os.environ["COMPACTOR_SPARK_LOG"] = spark_log
        install_log_redaction()  # storage option values never reach a log line
        try:
            code = f(*args, **kwargs)
        except click.exceptions.Exit:
            raise
        except click.ClickException:
            raise
        except BrokenPipeError:
            _quiet_closed_pipe()
            sys.exit(exit_codes.BROKEN_PIPE)
        except CompactorError as e:
            click.echo(f"Error: {redact(e.message)}", err=True)
            if e.hint:
                click.echo(f"Hint: {redact(e.hint)}", err=True)
            if debug:
                click.echo(redact(traceback.format_exc()), err=True)
            sys.exit(exit_codes.for_error(e.code))
        except OSError as e:
            if debug:
                traceback.print_exc()
            click.echo(f"Error: {_os_error_message(e)}", err=True)
            sys.exit(exit_codes.USAGE)
        except RecursionError:
            if debug:
                traceback.print_exc()
            click.echo("Error: the input is nested too deeply to process", err=True)
            sys.exit(exit_codes.USAGE)
        except KeyboardInterrupt:
            click.echo("Interrupted.", err=True)
            sys.exit(exit_codes.INTERRUPTED)
        except Exception as e:  # noqa: BLE001 - the last line of defence
            if debug:
                click.echo(redact(traceback.format_exc()), err=True)
            click.echo(redact(f"Internal error: {type(e).__name__}: {e}"), err=True)
            click.echo("Run again with --debug for a traceback; please report it.", err=True)
            sys.exit(exit_codes.USAGE)
        finally:
            if spark_log is not None and os.environ.get("COMPACTOR_SPARK_LOG") == spark_log:
                del os.environ["COMPACTOR_SPARK_LOG"]  # in-process callers (tests, notebooks) get it back
        sys.exit(code or 0)

    return wrapper


def _quiet_closed_pipe() -> None:
    """The reader of stdout went away (``compactor debug | head -1``): what is left to print goes nowhere,
    and the command ends quietly, as a tool killed by SIGPIPE does, not with "Error: Broken pipe"."""
    try:
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
        os.close(devnull)
    except (OSError, ValueError):  # no real stdout (a caller's StringIO): nothing to point elsewhere
        pass


def advice(target: Target, project_dir: Path | None, target_option: str | None) -> Any:
    """What the next steps printed beside skips may name: the --target and --project-dir the user gave, and
    a target of the profile that runs the spark engine."""
    from compactor.planning.explain import Advice

    shown = None if project_dir is None or Path(project_dir) == Path(".") else str(project_dir)
    return Advice(target=target_option, spark_target=target.spark_target, project_dir=shown)


def echo_json(data: Any) -> None:
    click.echo(json.dumps(data, indent=2, sort_keys=False, default=str))


def plan_key(option: str) -> bytes:
    """The plan-signing key from the environment (never an argument: it would land in shell history and
    process listings)."""
    import os

    from compactor.api import PLAN_KEY_ENV as KEY_ENV
    from compactor.errors import UsageError

    key = os.environ.get(KEY_ENV, "")
    if not key:
        raise UsageError(f"{option} needs the signing key in the environment variable {KEY_ENV}")
    return key.encode()
