"""Collect what `compactor report` draws: each selected table's files now and before the last apply, its
partitions, the plan's promise, the apply runs that touched it and the growth of its metadata logs. The
page itself is output/report/html.py."""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import TYPE_CHECKING

from compactor.formats import get_format
from compactor.models.report import RunPoint, TableReport
from compactor.models.table import TableLocation, table_ref
from compactor.planning.explain import Advice, table_verdict
from compactor.project.model import ProjectOptions

if TYPE_CHECKING:  # pragma: no cover
    from compactor.formats.base import TableFormat
    from compactor.models.results import RunResults
    from compactor.models.state import TableState
    from compactor.planning.plan import Plan
    from compactor.policy.model import TablePolicy
    from compactor.project.compile import CompiledProject

__all__ = ["RunPoint", "TableReport", "collect_report"]


def _part_label(values: Mapping[str, object]) -> str:
    return "/".join(f"{k}={v}" for k, v in values.items()) or "(table)"


def collect_report(options: ProjectOptions, plan: Plan | None = None, history_runs: int = 20, *,
                   compiled: CompiledProject | None = None) -> list[TableReport]:
    """The report of every selected, enabled table. ``plan``: the plan to highlight (a saved one; default:
    plan now, from the same table states the report draws). ``compiled``: the project as the command
    already compiled it. Each table's current state is read once."""
    from compactor.project.compile import compile_project
    from compactor.tasks.history import load_history
    from compactor.tasks.plan import plan_project, read_project

    compiled = compiled or compile_project(options)
    read = read_project(compiled)
    if read.discover_errors:  # a discover root that cannot be listed fails the report, as it always has
        raise next(iter(read.discover_errors.values()))
    plan = plan or plan_project(options, compiled=compiled, read=read)
    planned: dict[str, set[str]] = {t.name: {_part_label(dict(a.partition)) for a in t.actions
                                             if a.rewrites}
                                    for t in plan.tables}
    planned_tables = {t.name: t for t in plan.tables}
    runs = load_history(compiled.project.target_dir, last=history_runs)
    advice = Advice(target=options.target, spark_target=compiled.target.spark_target,
                    project_dir=None if Path(options.project_dir) == Path(".") else str(options.project_dir))
    out = []
    for p in read.policies:
        if not p.enabled:
            continue
        rep = TableReport(p.name, p.format, p.path or p.name, p.compaction.target_file_size, p.compaction.min_file_size,
                          planned=planned.get(p.name, set()))
        tp = planned_tables.get(p.name)
        if tp is not None:
            rep.verdict = table_verdict(tp, advice)
        if tp is not None and not tp.error:
            rep.plan_files_before, rep.plan_files_after = tp.files_before, tp.files_after
            rep.plan_bytes = sum(a.input_bytes for a in tp.actions if a.rewrites)
            rep.plan_input_files = sum(a.input_files for a in tp.actions if a.rewrites)
        state = read.states[p.name]
        if isinstance(state, Exception):
            rep.error = str(state)
        else:
            _fill(rep, p, state, compiled, [r for r in runs if any(x.table == p.name for x in r.results)])
        out.append(rep)
    return out


def _fill(rep: TableReport, p: TablePolicy, state: TableState, compiled: CompiledProject,
          mine: list[RunResults]) -> None:
    """A readable table's files, partitions, log growth and history (``mine``: the runs that touched it)."""
    fmt = get_format(p.format)
    where = table_ref(p.path or p.name, compiled.target.storage_options, p.catalog, compiled.target.catalogs)
    f = state.files
    rep.sizes_now = f.column("size_bytes").to_pylist()
    cols = [f.column(f"partition.{c}").to_pylist() for c in state.partition_columns]
    for i, size in enumerate(rep.sizes_now):
        label = _part_label({c: cols[j][i] for j, c in enumerate(state.partition_columns)})
        files, small, size_sum = rep.partitions.get(label, (0, 0, 0))
        rep.partitions[label] = (files + 1, small + (size < p.compaction.min_file_size), size_sum + size)
    if "deleted_rows" in f.column_names:  # soft-deleted rows (TableState): readers skip them, a rewrite drops them
        for i, n in enumerate(f.column("deleted_rows").to_pylist()):
            if n:
                label = _part_label({c: cols[j][i] for j, c in enumerate(state.partition_columns)})
                rep.deleted_rows[label] = rep.deleted_rows.get(label, 0) + n
    rep.logs = fmt.log_growth(where, p).logs
    for r in mine:
        res = [x for x in r.results if x.table == p.name]
        after_v = max((x.table_version_after for x in res if x.table_version_after is not None), default=None)
        files_after = mean_after = None
        s = None if after_v is None else _state_at(fmt, where, after_v)
        if s is not None:
            files_after = s.file_count
            mean_after = s.total_bytes / max(1, s.file_count)
        rep.trend.append(RunPoint(r.run_id, r.finished_at, sum(x.files_removed for x in res),
                                  sum(x.files_added for x in res),
                                  sum(x.bytes_removed for x in res if x.status == "success"), files_after,
                                  mean_after))
    if mine:
        res = [x for x in mine[-1].results if x.table == p.name and x.table_version_before is not None]
        if res:
            before = _state_at(fmt, where, min(x.table_version_before or 0 for x in res))
            rep.sizes_before = None if before is None else before.files.column("size_bytes").to_pylist()


def _state_at(fmt: TableFormat, where: TableLocation, version: int) -> TableState | None:
    """The table at an earlier version; None when its format keeps none or it is gone (history whose files
    were deleted is simply not drawn)."""
    try:
        return fmt.state_at(where, version)
    except Exception:  # noqa: BLE001
        return None
