"""Render apply progress and run results."""

from __future__ import annotations

from collections import defaultdict
from typing import Any

from rich.console import Console
from rich.table import Table

from compactor.models.events import (
    ActionFinished,
    ActionStarted,
    BinsDone,
    DuplicateFoundLater,
    GroupStarted,
    Interrupted,
    OutOfTime,
    ProgressEvent,
    WatchWaiting,
)
from compactor.models.results import ActionResult, RunResults
from compactor.output.text import safe
from compactor.planning.vocabulary import rewrite_types
from compactor.units import format_size


class ProgressPrinter:
    """Progress callback: a live line on a terminal, plain log lines otherwise."""

    #: seconds between two bin progress lines of a table
    BINS_EVERY_S = 2.0

    def __init__(self, console: Console) -> None:
        self.console = console
        self.done_bytes = 0
        self.bins_printed: dict[str, float] = {}
        #: the results whose error line was printed (the run's summary does not print it again)
        self.shown: set[int] = set()
        #: the last note printed (a commit group's members share theirs: it is printed once)
        self.last_note: str | None = None

    def __call__(self, event: ProgressEvent) -> None:
        match event:
            case BinsDone():
                self._bins(event)
            case OutOfTime(table, skipped, budget):
                self.console.print(f"{safe(table)}: max_runtime ({budget:.0f}s) reached; "
                                   f"{skipped} action(s) left for the next run", highlight=False)
            case Interrupted(table, skipped):
                self.console.print(f"{safe(table)}: interrupted; {skipped} action(s) not started, left for the next "
                                   "run", highlight=False)
            case GroupStarted(table, first, last, count, bins, size):
                span = f"{first + 1}" if first == last else f"{first + 1}-{last + 1}"
                self.console.print(f"\\[{span}/{count}] {safe(table)}: {last - first + 1} partition(s), "
                                   f"{bins} bin(s), {format_size(size)} in one commit", highlight=False)
            case ActionStarted(table, action, partition, size, index, count):
                part = "/".join(f"{k}={v}" for k, v in partition.items()) or "(table)"
                self.console.print(f"\\[{index + 1}/{count}] {safe(table)}: {safe(action)} "
                                   f"{safe(part)} ({format_size(size)})", highlight=False)
            case WatchWaiting(tables, seconds):
                self.console.print(f"watching {len(tables)} table(s) for another {seconds:.0f}s for "
                                   "concurrent compactions of the files just rewritten (watch_window / --watch)",
                                   highlight=False)
            case DuplicateFoundLater(table, found):
                self.console.print(f"    [red]{safe(table)}: version(s) {found.conflicting_versions} rewrote "
                                   "files compactor had just rewritten: rows are live twice; `compactor plan` plans "
                                   "the repair[/]", highlight=False)
            case ActionFinished(_, r):
                self._finished(r)

    def _finished(self, r: ActionResult) -> None:
        if r.error:
            self.shown.add(id(r))
        d = r.details
        if d.commit_group:  # one line per partition of a commit group
            part = "/".join(f"{k}={v}" for k, v in r.partition.items()) or "(table)"
            how = f" ({d.method})" if d.method else ""
            self.console.print(f"    {safe(part)}: {safe(r.status)} {r.files_removed} -> {r.files_added} file(s)"
                               f"{how}{': ' + safe(r.error) if r.error else ''}", highlight=False)
            if r.status == "success":
                self.done_bytes += r.bytes_removed
                self._note(d.note)
            return
        if d.dry_run and r.status == "skipped" and d.would_rewrite_files is not None:
            self.console.print(f"    -> would rewrite {d.would_rewrite_files} file(s) (dry run: "
                               "preconditions hold, nothing written)", highlight=False)
        elif r.status != "success":
            self.console.print(f"    -> {safe(r.status)}{': ' + safe(r.error) if r.error else ''}", highlight=False)
        else:
            if r.type in rewrite_types():  # a deletion's bytes (bytes_removed) are not rewritten
                self.done_bytes += r.bytes_removed
            self.console.print(f"    -> ok: {r.files_removed} -> {r.files_added} file(s), {r.duration_s:.2f}s "
                               f"(total rewritten {format_size(self.done_bytes)})", highlight=False)
            self._note(d.note)
        if d.kept:  # the deletion gate's (runtime/deletion.py): listed, but referenced when it came to deleting
            path, why = next(iter(d.kept.items()))
            self.console.print(f"    kept {len(d.kept)} listed file(s) the table references now, e.g. {safe(path)}: "
                               f"{safe(why)} (run_results.json names each)", highlight=False)

    def _note(self, note: str | None) -> None:
        """What the format says of a successful action beyond its counts (a native method's semantics)."""
        if note and note != self.last_note:
            self.console.print(f"    note: {safe(note)}", highlight=False, soft_wrap=True)
        self.last_note = note

    def _bins(self, e: BinsDone) -> None:
        """At most one line every BINS_EVERY_S per table, and the last bin."""
        import time

        now = time.monotonic()
        last = e.bins_done == e.bins_total
        if not last and now - self.bins_printed.get(e.table, 0.0) < self.BINS_EVERY_S:
            return
        self.bins_printed[e.table] = now
        self.console.print(f"    {safe(e.table)}: {e.bins_done}/{e.bins_total} bins, "
                           f"{format_size(e.bytes_done)} of {format_size(e.bytes_total)} read", highlight=False)


def render_run(run: RunResults, console: Console, *, shown: set[int] | frozenset[int] = frozenset()) -> None:
    """The run's summary. ``shown``: ids of the results whose error line the progress printed already: each
    line is printed once."""
    per: dict[str, dict[str, Any]] = defaultdict(lambda: defaultdict(int))
    rewrites = rewrite_types()
    for r in run.results:
        t = per[r.table]
        dry = r.details.would_rewrite_files is not None  # a dry run: what the action would have done
        t["removed"] += r.details.would_rewrite_files or 0 if dry else r.files_removed
        t["added"] += r.details.would_write_files or 0 if dry else r.files_added
        t["bytes"] += r.bytes_removed if r.type in rewrites else 0
        t["time"] += r.duration_s
        t[r.status] += 1
    table = Table(title=f"run {safe(run.run_id)} ({safe(run.engine)} engine){' - DRY RUN' if run.dry_run else ''}",
                  title_justify="left")
    files = "files: would remove -> add" if run.dry_run else "files removed -> added"
    for col in ("table", files, "bytes rewritten", "time", "would run" if run.dry_run else "ok", "stale", "failed"):
        table.add_column(col)
    for name, t in per.items():
        table.add_row(safe(name), f"{t['removed']} -> {t['added']}", format_size(t["bytes"]), f"{t['time']:.2f}s",
                      str(t["skipped"] if run.dry_run else t["success"]), str(t["stale"]),
                      str(t["error"] + t["verification_failed"]))
    console.print(table)
    for r in run.results:
        if r.error and id(r) not in shown:
            console.print(f"[red]{safe(r.status)}[/] {safe(r.table)} {safe(r.type)} {safe(r.partition)}: {safe(r.error)}",
                          highlight=False)
    for line in repair_lines(run):
        console.print(line, highlight=False)
    tot = run.totals
    if run.interrupted:
        console.print(interruption_text(run), highlight=False)
    if run.dry_run:
        would = [r for r in run.results if r.details.would_rewrite_files is not None]
        console.print(f"Dry run: {len(would)} action(s) would rewrite "
                      f"{sum(r.details.would_rewrite_files or 0 for r in would)} file(s) into "
                      f"{sum(r.details.would_write_files or 0 for r in would)}; {tot.stale} stale, {tot.errors} failed; "
                      "nothing was written")
        return
    console.print(f"Done: {tot.succeeded} succeeded, {tot.skipped} skipped, {tot.stale} stale, "
                  f"{tot.errors} failed, {tot.verification_failed} failed verification; "
                  f"rewrote {format_size(tot.bytes_rewritten)} in {tot.duration_s:.1f}s")


def interruption_text(run: RunResults) -> str:
    """What an interrupted run committed and what it left (`apply`'s summary, `history`)."""
    done = [r for r in run.results if r.status == "success"]
    left = sum(1 for r in run.results if r.status == "skipped" and r.details.note and "interrupted" in r.details.note)
    groups = sorted({f"{r.table} (version {r.table_version_after})" for r in done
                     if r.table_version_after is not None})
    what = (f"committed {len(done)} action(s): {', '.join(groups)}" if groups else
            f"committed {len(done)} action(s)" if done else "committed nothing")
    at_once = ("; a commit group under way when it stopped may have committed too (`compactor plan` shows what is "
               "left)" if run.interrupted == "at_once" else "")
    return f"Interrupted: {what}; {left} action(s) not started, left for the next run{at_once}"


def run_status(run: RunResults) -> str:
    """One word or phrase per run for `compactor history`: ok, failed, dry run, interrupted."""
    if run.interrupted:
        done = sum(1 for r in run.results if r.status == "success")
        return f"interrupted ({done} committed)"
    failed = run.totals.errors + run.totals.verification_failed
    if failed:
        return f"failed ({failed})"
    return "dry run" if run.dry_run else "ok"


def repair_lines(run: RunResults) -> list[str]:
    """One line per repair the run applied (a planned repair action, or the revert of its own commit)
    and per duplicate the post-commit watch found."""
    out = []
    for r in run.results:
        d = r.details
        if r.type == "repair" and d.repair is not None:
            rep = d.repair
            vs = sorted({x["later_version"] for x in rep.get("duplicates", ())})
            out.append(f"{'would repair' if run.dry_run else 'repaired'} {r.table}: rows live twice since version(s) "
                       f"{vs}, repaired in {rep.get('repair_versions')}, {rep.get('rows_deduplicated')} duplicated "
                       "rows removed")
        if d.repaired is not None:
            out.append(f"repaired {r.table} {r.type} {r.partition}: its commit overlapped version(s) "
                       f"{d.repaired.conflicting_versions} and was reverted in version {d.repaired.repair_version}")
        if d.duplicated_later is not None:
            out.append(f"rows live twice in {r.table}: version(s) {d.duplicated_later.conflicting_versions} rewrote the inputs "
                       f"of {r.type} {r.partition} again; `compactor plan` plans the repair")
    return out
