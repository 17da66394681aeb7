"""`compactor plan`: a reviewable dry run, written to target/plan.json."""

from __future__ import annotations

import json
from pathlib import Path
from typing import TYPE_CHECKING

import click

from compactor.cli import exit_codes
from compactor.cli.common import (
    advice,
    build_options,
    check_selection,
    debug_option,
    fail_on_empty_option,
    handle_errors,
    lean_imports,
    plan_key,
    prepare_output,
    project_options,
)

if TYPE_CHECKING:  # pragma: no cover
    from compactor.planning.plan import Plan


def apply_hint(plan: Plan, out: Path, project_dir: Path | str | None, target: str | None, default_out: Path) -> str:
    """The next command, exactly as it must be typed; none when the plan must not be applied as it is."""
    import shlex

    from compactor.output.plan_render import blocked_tables

    if plan.totals.errors or plan.totals.blocked:
        return (f"Plan written to {out}. It has {plan.totals.errors} error(s)"
                + "".join(f" and {n} table(s) with {kind.title}" for kind, n in blocked_tables(plan))
                + ": fix them and plan again before applying.")
    if not plan.has_changes:
        return f"Plan written to {out}. No changes: nothing to apply."
    cmd = ["compactor", "apply", str(out)]
    if project_dir not in (None, ".", Path(".")):
        cmd += ["--project-dir", str(project_dir)]
    if target:
        cmd += ["--target", target]
    return f"Plan written to {out}. Apply exactly this plan with: {shlex.join(cmd)}"


@click.command("plan")
@project_options
@click.option("--out", type=click.Path(dir_okay=False, path_type=Path), default=None,
              help="Plan file to write (default: <target-path>/plan.json).")
@click.option("--format", "fmt", type=click.Choice(["text", "json", "markdown"]), default="text", show_default=True)
@click.option("--partitions", is_flag=True, help="List every partition and skip, not a summary.")
@click.option("--detailed-exitcode", is_flag=True, help="Exit 0 no changes, 2 changes present, 1 error (like Terraform).")
@click.option("--metrics", type=click.Path(dir_okay=False, path_type=Path), default=None,
              help="Also write metrics (.prom: Prometheus text format, .jsonl: JSON lines).")
@click.option("--sign", is_flag=True,
              help="Sign the plan file with the key in COMPACTOR_PLAN_KEY (HMAC-SHA256), for `apply --require-signature`.")
@fail_on_empty_option
@debug_option
@handle_errors
def command(project_dir: Path, profiles_dir: Path | None, target: str | None, vars_text: str | None,
            select: tuple[str, ...], exclude: tuple[str, ...], out: Path | None, fmt: str, partitions: bool,
            detailed_exitcode: bool, metrics: Path | None, sign: bool, fail_on_empty: bool, debug: bool) -> int:
    """Inspect the selected tables and write an execution plan (nothing is changed)."""
    from compactor import api
    from compactor.output.plan_render import render_markdown, render_text
    from compactor.output.text import console as make_console
    from compactor.output.text import safe
    from compactor.planning.plan import plan_to_dict

    options = build_options(project_dir, profiles_dir, target, vars_text, select, exclude)
    key = plan_key("--sign") if sign else None
    compiled = api.compile_project(options)
    lean_imports(compiled.target)
    if check_selection(options, compiled.policies, compiled.all_policies, fail_on_empty):
        return exit_codes.FAILURE
    if not compiled.policies:
        return exit_codes.OK  # nothing selected: the plan file of the last real plan is left as it is
    if out is None:
        out = compiled.project.target_dir / "plan.json"
    prepare_output(out, "--out")
    prepare_output(metrics, "--metrics")
    err_console = make_console(stderr=True)
    if err_console.is_terminal and fmt == "text":
        with err_console.status("inspecting tables...") as status:
            plan = api.plan(options, out=out, sign_key=key, compiled=compiled,
                            progress=lambda name, i, n: status.update(f"inspected {i}/{n}: {safe(name)}"))
    else:
        plan = api.plan(options, out=out, sign_key=key, compiled=compiled)
    if fmt == "json":
        click.echo(json.dumps(plan_to_dict(plan), indent=2))
    elif fmt == "markdown":
        click.echo(render_markdown(plan))
    else:
        render_text(plan, make_console(), partitions=partitions,
                    advice=advice(compiled.target, project_dir, target))
        click.echo(apply_hint(plan, out, project_dir, target, compiled.project.target_dir / "plan.json"))
    if metrics is not None:
        from compactor.output.metrics import write_metrics

        write_metrics(metrics, plan=plan)
    # a table with a blocker no planned action answers fails the plan like an error (apply would refuse it)
    if detailed_exitcode:
        if plan.totals.errors or plan.totals.blocked:
            return exit_codes.PLAN_ERROR
        return exit_codes.PLAN_CHANGES if plan.has_changes else exit_codes.OK
    return exit_codes.FAILURE if plan.totals.errors or plan.totals.blocked else exit_codes.OK
