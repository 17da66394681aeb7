"""`compactor demo [DIR]`: a demo lake, then validate -> plan -> apply on the local engine."""

from __future__ import annotations

import math
from collections.abc import Callable
from pathlib import Path

import click

from compactor.cli import exit_codes
from compactor.cli.common import debug_option, handle_errors


def _histogram(sizes: list[int], width: int = 40) -> list[str]:
    from compactor.units import format_size

    if not sizes:
        return ["(no files)"]
    buckets: dict[int, int] = {}
    for s in sizes:
        buckets[int(math.log2(max(s, 1)))] = buckets.get(int(math.log2(max(s, 1))), 0) + 1
    top = max(buckets.values())
    return [f"  {format_size(2 ** b):>10} - {format_size(2 ** (b + 1)):>10} | {'#' * max(1, n * width // top):<{width}} {n}"
            for b, n in sorted(buckets.items())]


def _switches(command: Callable[..., int]) -> Callable[..., int]:
    """A `--no-<word>` flag per demo table a format lets the user leave out, with the format's help: the
    command gets ``with_<word>`` (False when the flag is given)."""
    from compactor import api

    for s in reversed(api.demo_switches()):
        command = click.option(f"--no-{s.word}", f"with_{s.word}", flag_value=False, default=True,
                               help=s.help)(command)
    return command


@click.command("demo")
@click.argument("directory", type=click.Path(file_okay=False, path_type=Path), default=Path("compactor-demo"))
@_switches
@debug_option
@handle_errors
def command(directory: Path, debug: bool, **switches: bool) -> int:
    """Create a demo lake in DIRECTORY (default ./compactor-demo) and compact it end to end."""
    from compactor import api
    from compactor.output.apply_render import render_run
    from compactor.output.plan_render import render_text
    from compactor.output.text import console as make_console
    from compactor.output.text import plural, safe, speed_change
    from compactor.project.model import ProjectOptions
    from compactor.units import format_size

    # soft wrap: long lines (paths, commands to copy) are wrapped by the terminal, never split by rich
    console = make_console(soft_wrap=True)
    console.rule("[bold]compactor demo")
    demo = api.demo(directory, say=lambda s: console.print(f"• {safe(s)}"), **switches)
    for note in demo.notes:
        console.print(f"[yellow]note:[/] {safe(note)}")
    select = tuple(demo.tables)
    options = ProjectOptions(project_dir=demo.project_dir, select=select)
    before = api.demo_snapshots(demo)

    console.rule("1. compactor validate")
    result = api.validate(options)
    for d in result.diagnostics:
        console.print(safe(d), highlight=False)
    console.print(f"{'OK' if result.ok else 'FAILED'}: "
                  f"{plural(len(result.all_policies), 'table policy', 'table policies')} in "
                  f"{plural(len(result.files), 'file')}")
    if not result.ok:
        return exit_codes.FAILURE

    console.rule("2. compactor plan")
    plan = api.plan(options)
    plan_path = api.write_plan(plan, demo.project_dir / "target" / "plan.json")
    render_text(plan, console)
    console.print(f"plan written to {safe(plan_path)}")

    console.rule("3. compactor apply target/plan.json")
    run = api.apply(options, plan_file=plan_path, watch_s=0)  # the demo lake has no other writers
    render_run(run, console)

    console.rule("before -> after")
    after = api.demo_snapshots(demo)
    for name, b in before.items():
        a = after[name]
        console.print(f"[bold]{safe(name)}[/]: files {b.files} -> {a.files}, mean file size "
                      f"{format_size(b.bytes / max(1, b.files))} -> {format_size(a.bytes / max(1, a.files))}, "
                      f"rows {b.rows:,} -> {a.rows:,} ({'unchanged' if a.rows == b.rows else 'CHANGED!'})")
        console.print("file sizes before:")
        for line in _histogram(b.sizes):
            console.print(safe(line), highlight=False)
        console.print("file sizes after:")
        for line in _histogram(a.sizes):
            console.print(safe(line), highlight=False)
        console.print(f"full scan: {b.scan_s * 1000:.0f} ms -> {a.scan_s * 1000:.0f} ms "
                      f"({speed_change(b.scan_s, a.scan_s)})")
    console.print(f"\nThe demo project is in {safe(demo.project_dir)}: try "
                  f"`compactor plan --project-dir {safe(demo.project_dir)}`.")
    return exit_codes.OK if run.ok else exit_codes.FAILURE
