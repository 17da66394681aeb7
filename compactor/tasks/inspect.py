"""Health report of a table (any format), or of a path that holds none (`compactor inspect`).

Pure reading: file counts and a size histogram per partition and the small-file share, for every format;
what differs between formats (the health of their logs, duplicate rewrites) comes from the table's format
(``TableFormat.inspect``), and what a path without a table shows from formats/no_table.py. The
recommendation about the table's files is the planner's own
verdict, in the words `plan` prints (planning/explain.py): under the table's policy, or, where no policy of
the project names the table, under compactor's default policy, saying so."""

from __future__ import annotations

import datetime as dt
from collections.abc import Mapping
from dataclasses import replace
from pathlib import Path
from typing import TYPE_CHECKING

import pyarrow as pa
import pyarrow.compute as pc

from compactor.errors import UsageError
from compactor.formats import get_format
from compactor.formats.discover import format_at
from compactor.formats.no_table import inspect_no_table
from compactor.models.inspect import (
    BUCKET_LABELS,
    BUCKETS,
    SMALL_FILE_DEFAULT,
    ComparedSettings,
    FileSizeSettings,
    InspectReport,
    PartitionHealth,
)
from compactor.models.state import TableState
from compactor.models.table import TableLocation
from compactor.planning.explain import Advice, table_verdict
from compactor.policy.build import default_table_policy
from compactor.policy.model import TablePolicy
from compactor.project.model import ProjectOptions
from compactor.runtime.secrets import register_secrets

if TYPE_CHECKING:  # pragma: no cover
    from compactor.project.compile import CompiledProject


def _histogram(sizes: pa.Array) -> dict[str, int]:
    counts = dict.fromkeys(BUCKET_LABELS, 0)
    for s in sizes.to_pylist():
        i = next((k for k, b in enumerate(BUCKETS) if s < b), len(BUCKETS))
        counts[BUCKET_LABELS[i]] += 1
    return counts


def _partitions(state: TableState, small: int) -> tuple[PartitionHealth, ...]:
    files = state.files
    cols = [f"partition.{c}" for c in state.partition_columns]
    if files.num_rows == 0:
        return ()
    keys = (["/".join(f"{c[10:]}={v}" for c, v in zip(cols, vals)) for vals in zip(*(files.column(c).to_pylist()
            for c in cols))] if cols else [""] * files.num_rows)
    deleted = files.column("deleted_rows") if "deleted_rows" in files.column_names else pa.nulls(files.num_rows,
                                                                                                    pa.int64())
    t = pa.table({"k": keys, "size": files.column("size_bytes"), "rows": files.column("num_records"),
                  "deleted": deleted})
    out = []
    for k in sorted(set(keys)):
        part = t.filter(pc.equal(t.column("k"), k))
        sizes, rows = part.column("size"), part.column("rows")
        out.append(PartitionHealth(k or "(unpartitioned)", len(sizes), int(pc.sum(sizes).as_py() or 0),
                                   int(pc.sum(pc.less(sizes, small)).as_py() or 0), _histogram(sizes),
                                   deleted_rows=int(pc.sum(part.column("deleted")).as_py() or 0),
                                   rows=None if rows.null_count else int(pc.sum(rows).as_py() or 0)))
    return tuple(out)


def inspect_path(path: str, storage_options: Mapping[str, str] | None = None, *,
                 settings: ComparedSettings | None = None, horizon: int | None = None,
                 table_policy: TablePolicy | None = None, engine: str = "local",
                 advice: Advice = Advice()) -> InspectReport:
    """``settings``: those of the compactor policy that manages the table, to compare against, as its
    format reads them (``TableFormat.inspect_settings``: min_file_size, and the format's own such as its
    log settings); ``table_policy``: that policy (the
    report says what the planner decides under it; without one, under compactor's default policy).
    ``engine``: the engine the plan is made for (the target's); ``advice``: what its next steps may name.
    ``horizon``: how many of the newest commits to scan for duplicate rewrites. ``path``: a local path or an
    object-store URI (``storage_options`` reach it)."""
    register_secrets(storage_options)
    so: Mapping[str, str] = storage_options or {}
    fmt = format_at(path, so)
    given = settings or FileSizeSettings()
    if fmt is None:
        return inspect_no_table(path, so, given)
    small = int(given.min_file_size or SMALL_FILE_DEFAULT)
    where = TableLocation(path, so)
    state = fmt.read_state(where)
    found = fmt.inspect(where, state, settings=settings, horizon=horizon)
    parts = _partitions(state, small)
    n_small = sum(p.small_files for p in parts)
    # the planner decides (what `compactor plan` says), never a small-file share of its own
    recs = _planned(table_policy or default_policy(fmt.name, path), path, so, engine, advice)
    if table_policy is None:
        recs.insert(0, "no policy of the project names this table: the plan below is under compactor's default "
                       "policy (write one to change it)")
    return InspectReport(path, fmt.name, state.file_count, state.total_bytes, small, n_small, parts, found.logs,
                         given, (*recs, *found.recommendations), found.duplicates, found.log_window, found.warnings,
                         found.sections)


def default_policy(fmt: str, path: str) -> TablePolicy:
    """The policy a table gets when none is written: every default, its format's own blocks included."""
    return default_table_policy(path.rstrip("/").rsplit("/", 1)[-1] or path, fmt, path)


def _planned(policy: TablePolicy, path: str, storage_options: Mapping[str, str], engine: str,
             advice: Advice) -> list[str]:
    """The planner's own verdict for the table under ``policy``, in the words `plan` prints."""
    fmt = get_format(policy.format)
    pol = replace(policy, path=path)
    state = fmt.read_state(TableLocation(path, storage_options), pol)
    return table_verdict(fmt.plan_table(pol, state, now=dt.datetime.now(dt.UTC), engine=engine), advice)


# ----------------------------------------------------------------------------- under a project


def table_policy(compiled: CompiledProject, table: str) -> TablePolicy:
    """The named table's policy in the project, its path resolved (discover entries expanded)."""
    from compactor.tasks.plan import expand_policies

    pols = expand_policies(compiled.all_policies, compiled.project.root, compiled.target.storage_options, {},
                           target=compiled.target)
    pol = next((p for p in pols if p.name == table), None)
    if pol is None:
        raise UsageError(f"table {table!r} is not declared in {compiled.project.root}",
                         hint="`compactor ls --project-dir DIR` lists the project's tables")
    return pol


def policy_at(compiled: CompiledProject, path: str) -> TablePolicy | None:
    """The policy of the project that names the table at ``path``: by its path, or a folder discover that
    finds it. Tables named through a catalog are not looked up (that may start a JVM for a bare path)."""
    from compactor.tasks.plan import expand_policies, resolve_path

    wanted = resolve_path(path, Path.cwd()).rstrip("/")
    local = [p for p in compiled.all_policies if p.catalog is None and (p.discover is None or p.discover.catalog is None)]
    found: dict[str, Exception] = {}
    for p in expand_policies(local, compiled.project.root, compiled.target.storage_options, found,
                             target=compiled.target):
        if p.path is not None and p.name not in found and p.path.rstrip("/") == wanted:
            return p
    return None


def inspect_settings(policy: TablePolicy) -> ComparedSettings:
    """The settings of ``policy`` that inspect compares the table against, as its format reads them."""
    return get_format(policy.format).inspect_settings(policy)


def inspect_in_project(options: ProjectOptions, path: str, *, table: str | None = None,
                       horizon: int | None = None,
                       storage_options: Mapping[str, str] | None = None) -> InspectReport:
    """`compactor inspect PATH`: ``path`` is a table's location or the name of a table of the project
    (``options``); with ``table`` (or a table name as ``path``) the table is compared against its policy,
    and a ``path`` of "-" (or the table's name) is the policy's path; a location some policy of the project
    names is compared against that policy. An object-store path is read with ``storage_options``, by
    default the target's. The planner's verdict is for the target's engine."""
    from compactor.project.compile import compile_project

    if table is None and "/" not in path and "://" not in path and not Path(path).exists():
        table = path  # a table name of the project
    in_project = table is not None or (Path(options.project_dir) / "compactor.yml").is_file()
    compiled = compile_project(options) if in_project else None
    pol = None
    if compiled is not None:
        pol = table_policy(compiled, table) if table else policy_at(compiled, path)
    if pol is not None and (path in ("-", table) or not Path(path).exists() and "://" not in path):
        path = pol.path or path
    if storage_options is None:
        storage_options = {}
        if "://" in path and not path.startswith("file:") and compiled is not None:
            storage_options = compiled.target.storage_options
    advice = Advice() if compiled is None else Advice(
        target=options.target, spark_target=compiled.target.spark_target,
        project_dir=None if Path(options.project_dir) == Path(".") else str(options.project_dir))
    return inspect_path(path, storage_options, settings=None if pol is None else inspect_settings(pol),
                        horizon=horizon, table_policy=pol, engine=compiled.target.engine if compiled else "local",
                        advice=advice)
