"""Render a Plan as rich text (terminal) or markdown (pull-request comments)."""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable
from typing import Any

from rich.console import Console
from rich.table import Table

from compactor.output.text import plural, safe
from compactor.planning.actions import partition_label
from compactor.planning.blocker_kinds import BlockerKind
from compactor.planning.blockers import by_kind
from compactor.planning.explain import Advice, skip_lines
from compactor.planning.plan import Action, Plan, Skip, TablePlan
from compactor.planning.vocabulary import blocker_kind
from compactor.units import format_size


def _skip_summary(skips: Iterable[Skip]) -> str:
    counts = Counter(s.reason for s in skips)
    return ", ".join(f"{r} x{n}" for r, n in counts.most_common())


def _action_row(a: Action) -> tuple[str, ...]:
    row = a.row()  # each action type says how it reads (planning/actions.py ActionRow)
    return (a.type, row.partition, row.files, row.bytes, row.detail)


def blocked_tables(plan: Plan) -> list[tuple[BlockerKind, int]]:
    """Per kind of blocker no planned action answers, how many tables it blocks."""
    counts: Counter[str] = Counter()
    for t in plan.tables:
        counts.update({b.kind for b in t.unanswered})
    return [(blocker_kind(code), n) for code, n in counts.items()]


def render_text(plan: Plan, console: Console, *, partitions: bool = False, max_rows: int = 20,
                advice: Advice = Advice()) -> None:
    """Table names, partition values, paths and error messages are user text: escaped, never markup. Each
    skip kind of a table is one line: why, and the next step (``advice``: the targets it may name)."""
    for t in plan.tables:
        title = f"[bold]{safe(t.name)}[/]  {safe(t.format)}  v{t.version if t.version is not None else '-'}"
        if t.error:  # one line whatever its length (soft wrap: a log keeps it whole)
            console.print(f"{title}\n  [red]error:[/] {safe(t.error)}", soft_wrap=True)
            continue
        if t.actions:
            console.print(title, highlight=False)  # not the table's title: rich wraps that to the table width
            table = Table(show_lines=False)
            for col in ("action", "partition", "files", "bytes", "rows / detail"):
                table.add_column(col, overflow="fold")
            shown = t.actions if partitions else t.actions[:max_rows]
            for a in shown:
                table.add_row(*map(safe, _action_row(a)))
            if len(shown) < len(t.actions):
                table.add_row("...", f"{len(t.actions) - len(shown)} more (use --partitions)", "", "", "")
            console.print(table)
        else:
            console.print(f"{title}\n  no changes")
        for b in t.blockers:  # apply refuses the table because of it, unless a planned action answers it
            kind = blocker_kind(b.kind)
            console.print(f"  [red]{safe(kind.title)}:[/] {safe(b.message)}; {safe(kind.answer(b, t.answered(b)))}",
                          highlight=False)
        if t.skipped and not t.error:
            for line in skip_lines(t.skipped, t.engine, advice):
                console.print(f"  skipped {safe(line)}", highlight=False, soft_wrap=True)
            if partitions:
                for s in t.skipped:
                    console.print(f"    {safe(partition_label(s.partition))}: {safe(s.reason)} - {safe(s.message)}")
        console.print(f"  files {t.files_before} -> {t.files_after}")
    tot = plan.totals
    console.print(
        f"[bold]Plan:[/] {plural(tot.actions, 'action')} on {sum(1 for t in plan.tables if t.actions)} of "
        f"{plural(tot.tables, 'table')}; files {tot.files_before} -> {tot.files_after}; "
        f"rewrite {format_size(tot.bytes_to_rewrite)} (~{format_size(tot.estimated_io_bytes)} read+written); "
        f"{plural(tot.errors, 'error')}"
        + "".join(f"; [red]{plural(n, 'table')} with {safe(kind.title)} that no {safe(kind.action)} answers[/]"
                  for kind, n in blocked_tables(plan)))


def render_markdown(plan: Plan) -> str:
    tot = plan.totals
    lines = [f"### compactor plan: {tot.actions} action(s), files {tot.files_before} → {tot.files_after}, "
             f"rewrite {format_size(tot.bytes_to_rewrite)}", "",
             f"Target `{plan.target.get('name')}` ({plan.target.get('engine')} engine), generated {plan.generated_at}.", "",
             "| table | version | actions | files before → after | bytes to rewrite | skipped |",
             "|---|---:|---:|---|---:|---|"]
    for t in plan.tables:
        rw = sum(a.input_bytes for a in t.actions if a.rewrites)
        kinds = Counter(a.type for a in t.actions)
        acts = ", ".join(f"{k} ×{n}" for k, n in kinds.items()) or "none"
        status = f"**error**: {t.error}" if t.error else _skip_summary(t.skipped) or "-"
        for code, blockers in by_kind(t.blockers).items():
            status = f"{blocker_kind(code).summary(blockers)}; {status}"
        lines.append(f"| `{t.name}` | {t.version if t.version is not None else '-'} | {acts} | "
                     f"{t.files_before} → {t.files_after} | {format_size(rw)} | {status} |")
    for t in plan.tables:
        rewrites = [a for a in t.actions if a.rewrites]
        if not rewrites:
            continue
        lines += ["", f"<details><summary><code>{t.name}</code>: {len(rewrites)} partition(s)</summary>", "",
                  "| partition | files | bytes | rows |", "|---|---|---:|---:|"]
        for a in rewrites[:50]:
            lines.append(f"| `{partition_label(a.partition)}` | {a.input_files} → {a.expected_output_files} | "
                         f"{format_size(a.input_bytes)} | {a.rows if a.rows is not None else '-'} |")
        if len(rewrites) > 50:
            lines.append(f"| … {len(rewrites) - 50} more | | | |")
        lines += ["", "</details>"]
    return "\n".join(lines) + "\n"


def table_summary(t: TablePlan) -> dict[str, Any]:
    return {"name": t.name, "actions": len(t.actions), "files_before": t.files_before, "files_after": t.files_after,
            "skipped": dict(Counter(s.reason for s in t.skipped)), "error": t.error}
