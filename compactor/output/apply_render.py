"""Render apply progress and run results."""

from __future__ import annotations

from collections import defaultdict
from typing import Any

from rich.console import Console
from rich.table import Table

from compactor.models.results import RunResults
from compactor.output.text import safe
from compactor.planning.plan import REWRITE_ACTIONS
from compactor.units import format_size


class ProgressPrinter:
    """Progress callback: a live line on a terminal, plain log lines otherwise."""

    #: seconds between two bin progress lines of a table
    BINS_EVERY_S = 2.0

    def __init__(self, console: Console) -> None:
        self.console = console
        self.done_bytes = 0
        self.bins_printed: dict[str, float] = {}

    def __call__(self, event: str, data: dict[str, Any]) -> None:
        if event == "bins":
            self._bins(data)
        elif event == "out_of_time":
            self.console.print(f"{safe(data['table'])}: max_runtime ({data['max_runtime_s']:.0f}s) reached; "
                               f"{data['skipped']} action(s) left for the next run", highlight=False)
        elif event == "group_start":
            first, last = data["first"] + 1, data["last"] + 1
            span = f"{first}" if first == last else f"{first}-{last}"
            self.console.print(f"\\[{span}/{data['count']}] {safe(data['table'])}: {last - first + 1} partition(s), "
                               f"{data['bins']} bin(s), {format_size(data['bytes'])} in one commit", highlight=False)
        elif event == "action_start":
            part = "/".join(f"{k}={v}" for k, v in (data.get("partition") or {}).items()) or "(table)"
            self.console.print(f"\\[{data['index'] + 1}/{data['count']}] {safe(data['table'])}: {safe(data['action'])} "
                               f"{safe(part)} ({format_size(data.get('bytes') or 0)})", highlight=False)
        elif event == "watch_wait":
            self.console.print(f"watching {len(data['tables'])} table(s) for another {data['seconds']:.0f}s for "
                               "concurrent compactions of the files just rewritten (watch_window / --watch)",
                               highlight=False)
        elif event == "duplicate_found":
            found = data["found"]
            self.console.print(f"    [red]{safe(data['table'])}: version(s) {found.get('conflicting_versions')} rewrote "
                               "files compactor had just rewritten: rows are live twice; `compactor plan` plans the "
                               "repair[/]", highlight=False)
        elif event == "action_end":
            r = data["result"]
            if r.details.get("commit_group"):  # one line per partition of a commit group
                part = "/".join(f"{k}={v}" for k, v in r.partition.items()) or "(table)"
                how = f" ({r.details['method']})" if r.details.get("method") else ""
                self.console.print(f"    {safe(part)}: {safe(r.status)} {r.files_removed} -> {r.files_added} file(s)"
                                   f"{how}{': ' + safe(r.error) if r.error else ''}", highlight=False)
                if r.status == "success":
                    self.done_bytes += r.bytes_removed
                return
            if r.details.get("dry_run") and r.status == "skipped" and "would_rewrite_files" in r.details:
                self.console.print(f"    -> would rewrite {r.details['would_rewrite_files']} file(s) (dry run: "
                                   "preconditions hold, nothing written)", highlight=False)
            elif r.status != "success":
                self.console.print(f"    -> {safe(r.status)}{': ' + safe(r.error) if r.error else ''}", highlight=False)
            else:
                self.done_bytes += r.bytes_removed
                self.console.print(f"    -> ok: {r.files_removed} -> {r.files_added} file(s), {r.duration_s:.2f}s "
                                   f"(total rewritten {format_size(self.done_bytes)})", highlight=False)


    def _bins(self, data: dict[str, Any]) -> None:
        """At most one line every BINS_EVERY_S per table, and the last bin."""
        import time

        now, table = time.monotonic(), data["table"]
        last = data["bins_done"] == data["bins_total"]
        if not last and now - self.bins_printed.get(table, 0.0) < self.BINS_EVERY_S:
            return
        self.bins_printed[table] = now
        self.console.print(f"    {safe(table)}: {data['bins_done']}/{data['bins_total']} bins, "
                           f"{format_size(data['bytes_done'])} of {format_size(data['bytes_total'])} read",
                           highlight=False)


def render_run(run: RunResults, console: Console) -> None:
    per: dict[str, dict[str, Any]] = defaultdict(lambda: defaultdict(int))
    for r in run.results:
        t = per[r.table]
        t["removed"] += r.files_removed
        t["added"] += r.files_added
        t["bytes"] += r.bytes_removed if r.type in REWRITE_ACTIONS else 0
        t["time"] += r.duration_s
        t[r.status] += 1
    table = Table(title=f"run {safe(run.run_id)} ({safe(run.engine)} engine){' - DRY RUN' if run.dry_run else ''}",
                  title_justify="left")
    for col in ("table", "files removed -> added", "bytes rewritten", "time", "ok", "stale", "failed"):
        table.add_column(col)
    for name, t in per.items():
        table.add_row(safe(name), f"{t['removed']} -> {t['added']}", format_size(t["bytes"]), f"{t['time']:.2f}s",
                      str(t["success"]), str(t["stale"]), str(t["error"] + t["verification_failed"]))
    console.print(table)
    for r in run.results:
        if r.error:
            console.print(f"[red]{safe(r.status)}[/] {safe(r.table)} {safe(r.type)} {safe(r.partition)}: {safe(r.error)}",
                          highlight=False)
    for line in repair_lines(run):
        console.print(line, highlight=False)
    tot = run.totals
    console.print(f"Done: {tot.succeeded} succeeded, {tot.skipped} skipped, {tot.stale} stale, "
                  f"{tot.errors} failed, {tot.verification_failed} failed verification; "
                  f"rewrote {format_size(tot.bytes_rewritten)} in {tot.duration_s:.1f}s")


def repair_lines(run: RunResults) -> list[str]:
    """One line per repair the run applied (a planned repair action, or the revert of its own commit)
    and per duplicate the post-commit watch found."""
    out = []
    for r in run.results:
        d = r.details or {}
        if r.type == "repair" and "repair" in d:
            rep = d["repair"]
            vs = sorted({x["later_version"] for x in rep.get("duplicates", ())})
            out.append(f"{'would repair' if run.dry_run else 'repaired'} {r.table}: rows live twice since version(s) "
                       f"{vs}, repaired in {rep.get('repair_versions')}, {rep.get('rows_deduplicated')} duplicated "
                       "rows removed")
        if "repaired" in d:
            rep = d["repaired"]
            out.append(f"repaired {r.table} {r.type} {r.partition}: its commit overlapped version(s) "
                       f"{rep.get('conflicting_versions')} and was reverted in version {rep.get('repair_version')}")
        if "duplicated_later" in d:
            rep = d["duplicated_later"]
            out.append(f"rows live twice in {r.table}: version(s) {rep.get('conflicting_versions')} rewrote the inputs "
                       f"of {r.type} {r.partition} again; `compactor plan` plans the repair")
    return out
