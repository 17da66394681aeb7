"""How tests/planning/v1/plan.json (a plan of schema version 1) and the words compactor printed for it were
made: run by the compactor that wrote version-1 plans (commit 0aaff86, before blockers), through its own
write_plan, renderers and apply's refusal of a table, never edited since:

    git worktree add --detach /tmp/v1 0aaff86
    PYTHONPATH=/tmp/v1 python tests/planning/v1/make.py tests/planning/v1

It holds every action type a version-1 plan can hold, rows live twice answered by a repair and rows live
twice no repair answers, every skip reason of a format, and a table that could not be planned."""

from __future__ import annotations

import io
import sys
from pathlib import Path

from rich.console import Console

from compactor.cli.plan import apply_hint
from compactor.models.duplicates import DuplicateReport
from compactor.output.plan_render import render_markdown, render_text
from compactor.planning import actions as A
from compactor.planning.plan import Plan, Skip, SkipReason, TablePlan, compute_totals
from compactor.tasks.plan_file import write_plan

P = A.Precondition
GUARDS = dict(quiet_period=0, checkpoint="/lake/cp", writer_stopped_check=True, downstream_streaming_readers="none",
              grace_period=3600, latest_compact="_spark_metadata/9.compact", latest_batch=11)


def _rewrite(cls, part, files, **kw):
    bins = (tuple(files),)
    return cls(partition=part, input_files=len(files), input_bytes=1000 * len(files), expected_output_files=1,
               expected_output_bytes=1000 * len(files), rows=10 * len(files), precondition=P.of(3, files), bins=bins,
               target_file_size=1 << 20, min_file_size=1 << 19, method="auto", reason="planned", **kw)


def plan() -> Plan:
    events = TablePlan(
        "events", "/lake/events", "delta", "local", 12, bin_model="delta-spark", partition_columns=("date",),
        actions=(
            A.RepairAction(anomalies=(7,), chain=(7,), remove=("date=1/c.parquet",), restore=("date=1/a.parquet",),
                           window_start=0, rows_removed=20, rows_restored=10, input_files=1, input_bytes=2000,
                           expected_output_files=1, rows=10,
                           precondition=P.of(12, ("date=1/c.parquet", "date=1/a.parquet")), reason="rows live twice"),
            _rewrite(A.CompactAction, {"date": "2"}, ["date=2/x.parquet", "date=2/y.parquet"]),
            A.SetPropertiesAction(properties={"delta.deletedFileRetentionDuration": "interval 8 days"},
                                  current={"delta.deletedFileRetentionDuration": None}, precondition=P.of(12, ())),
            A.VacuumAction(retention_hours=192, files_to_delete=1, files=("date=0/old.parquet",), input_files=1,
                           precondition=P.of(12, ("date=0/old.parquet",)), reason="vacuum"),
        ),
        skipped=(Skip(SkipReason.NOTHING_TO_VACUUM, None, {}, "a VACUUM now would delete no file"),),
        files_before=9, files_after=8, bytes_before=9000, policy_source="policies/t.yml:3", table_id="id-events",
        duplicate_rewrite=(DuplicateReport("double_remove", 7, (5,), ("date=1/a.parquet", "date=1/b.parquet"), 20,
                                           carriers=("date=1/c.parquet",)),))
    clicks = TablePlan(
        "clicks", "/lake/clicks", "delta", "spark", 4, bin_model="delta-spark", partition_columns=("d",),
        actions=(_rewrite(A.ZOrderAction, {"d": "1"}, ["d=1/p.parquet", "d=1/q.parquet"], z_order_by=("id",)),),
        skipped=(Skip(SkipReason.RETENTION_IN_SYNC, None, {"delta.deletedFileRetentionDuration": None},
                      "table properties match the declared retention"),),
        files_before=2, files_after=1, bytes_before=2000, table_id="id-clicks",
        duplicate_rewrite=(DuplicateReport("readd", 3, (2,), ("d=1/r.parquet",), None, repairable=False,
                                           reason="a later commit changed the rows of the extra copy"),))
    orders = TablePlan(
        "orders", "/lake/orders", "delta", "local", 2, bin_model="delta-spark",
        actions=(_rewrite(A.SortAction, {}, ["o1.parquet", "o2.parquet"], sort_by=("ts",)),),
        files_before=2, files_after=1, bytes_before=2000)
    sink_files = ["file:///lake/sink/part=1/s1.parquet", "file:///lake/sink/part=1/s2.parquet"]
    sink = TablePlan(
        "sink", "/lake/sink", "spark_file_sink", "local", 11, bin_model="delta-spark", partition_columns=("part",),
        actions=(
            A.SinkDeleteReplacedAction(files=("file:///lake/sink/part=1/old.parquet",), input_files=1,
                                       precondition=P.of(11, ("file:///lake/sink/part=1/old.parquet",)), **GUARDS),
            A.SinkPruneAction(retention=86400, horizon_ms=1700000000000, delete_files=True, input_files=1,
                              bins=(("file:///lake/sink/part=0/z.parquet",),),
                              precondition=P.of(11, ("file:///lake/sink/part=0/z.parquet",)), **GUARDS),
            _rewrite(A.SinkCompactAction, {"part": "1"}, sink_files, **GUARDS),
        ),
        files_before=5, files_after=4, bytes_before=5000)
    idle = TablePlan("idle_sink", "/lake/idle", "spark_file_sink", "local", 3, bin_model="delta-spark",
                     skipped=(Skip(SkipReason.WRITER_ACTIVE, None, {"latest_batch": 3}, "the newest sink log file is 5s old"),
                              Skip(SkipReason.DOWNSTREAM_READERS, {"part": "1"}, {}, "readers not acknowledged")))
    broken = TablePlan("broken", "/lake/broken", "delta", "local", None, error="not a Delta table",
                       skipped=(Skip(SkipReason.UNREADABLE, None, {}, "not a Delta table"),))
    tables = (events, clicks, orders, sink, idle, broken)
    return Plan(compactor_version="0.38.0", generated_at="2026-11-28T00:00:00+00:00", project="lake",
                target={"name": "dev", "engine": "local"}, tables=tables, totals=compute_totals(tables),
                invocation={"select": [], "exclude": [], "vars": {}, "target": "dev"})


def main(out: Path) -> None:
    p = plan()
    write_plan(p, out / "plan.json")
    buf = io.StringIO()
    render_text(p, Console(file=buf, width=160, color_system=None, highlight=False), partitions=True)
    (out / "plan.txt").write_text(buf.getvalue() + apply_hint(p, Path("plan.json"), None, None, Path("plan.json")) + "\n")
    (out / "plan.md").write_text(render_markdown(p))
    from compactor.tasks.table_run import _unanswered_duplicates  # apply's refusal, table by table

    refused = []
    for t in p.tables:
        results: list = []
        if _unanswered_duplicates(t, results, None):
            refused += [f"{t.name}\t{r.type}\t{r.status}\t{r.error}" for r in results]
    (out / "refusals.txt").write_text("\n".join(refused) + "\n")


if __name__ == "__main__":
    main(Path(sys.argv[1]))
