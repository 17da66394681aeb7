"""`compactor debug`: is everything a run needs reachable? One line per check, exit 1 on a failure (as
`dbt debug`)."""

from __future__ import annotations

from pathlib import Path

import click

from compactor.cli import exit_codes
from compactor.cli.common import build_options, debug_option, handle_errors, project_options


@click.command("debug")
@project_options
@click.option("--spark-session", is_flag=True,
              help="spark targets: also start a Spark session and load the table formats' jars (slow: 20-30 s).")
@debug_option
@handle_errors
def command(project_dir: Path, profiles_dir: Path | None, target: str | None, vars_text: str | None,
            select: tuple[str, ...], exclude: tuple[str, ...], spark_session: bool, debug: bool) -> int:
    """Check the project, the profile and target, each selected table's store with the target's
    credentials, and for a spark target Java (with spark.remote: that the Spark Connect server answers),
    pyspark and (with --spark-session) the table formats' jars."""
    from compactor import api

    failed = False
    for check in api.debug(build_options(project_dir, profiles_dir, target, vars_text, select, exclude),
                            spark_session=spark_session):
        failed |= not check.ok
        click.echo(f"{'OK  ' if check.ok else 'FAIL'} {check.name}: {check.detail}")
    click.echo("All checks passed!" if not failed else "Some checks failed.")
    return exit_codes.FAILURE if failed else exit_codes.OK
