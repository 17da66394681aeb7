"""`compactor ls`: the selected tables, their format, location and policy summary (dbt ls)."""

from __future__ import annotations

from pathlib import Path

import click

from compactor.cli import exit_codes
from compactor.cli.common import (
    build_options,
    check_selection,
    debug_option,
    echo_json,
    fail_on_empty_option,
    handle_errors,
    project_options,
)


@click.command("ls")
@project_options
@click.option("--format", "fmt", type=click.Choice(["text", "json"]), default="text", show_default=True)
@fail_on_empty_option
@debug_option
@handle_errors
def command(project_dir: Path, profiles_dir: Path | None, target: str | None, vars_text: str | None,
            select: tuple[str, ...], exclude: tuple[str, ...], fmt: str, fail_on_empty: bool, debug: bool) -> int:
    """List the selected tables (honours --select/--exclude): name, format, location, policy summary and
    where its policy comes from (a policy file, a catalog, a dbt node). Reads no table."""
    from compactor import api
    from compactor.output.text import console, safe
    from compactor.units import format_setting_size

    options = build_options(project_dir, profiles_dir, target, vars_text, select, exclude)
    compiled = api.compile_project(options)
    if check_selection(options, compiled.policies, compiled.all_policies, fail_on_empty):
        return exit_codes.FAILURE
    rows = []
    for p in compiled.policies:
        c = p.compaction
        summary = ("disabled" if not p.enabled else
                   f"{c.strategy} to {format_setting_size(c.target_file_size)}" if c.enabled else "compaction off")
        summary += "".join(f", {m}" for m in p.maintenance)
        d = p.discover
        ref = p.catalog
        where = (f"catalog {ref.catalog}: {ref.namespace}.{ref.table}" if ref is not None else p.path if d is None
                 else f"catalog {d.catalog}: {d.namespace} ({', '.join(d.include)})" if d.catalog is not None
                 else f"discover {d.root} ({', '.join(d.include)})")
        rows.append({"name": p.name, "format": p.format, "location": where or "-",
                     "policy": summary, "tags": list(p.tags),
                     "source": f"dbt {p.dbt.unique_id}, {p.source}" if p.dbt is not None else str(p.source)})
    if fmt == "json":
        echo_json({"tables": rows})
        return exit_codes.OK
    out = console()
    for r in rows:
        out.print(f"{safe(r['name'])}  {r['format']}  {safe(r['location'])}  {safe(r['policy'])}"
                  + (f"  tags: {', '.join(map(safe, r['tags']))}" if r["tags"] else "") + f"  ({safe(r['source'])})",
                  highlight=False)
    out.print(f"{len(rows)} table(s)", highlight=False)
    return exit_codes.OK
