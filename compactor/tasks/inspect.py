"""Health report of a table (any format), or of a streaming checkpoint (`compactor inspect`).

Pure reading: file counts and a size histogram per partition and the small-file share, for every format;
what differs between formats (a sink's metadata log, a Delta log's duplicate rewrites) comes from the
table's format (``TableFormat.inspect``). Under a policy, the planner's own verdict for the table."""

from __future__ import annotations

import datetime as dt
from collections import Counter
from collections.abc import Mapping
from dataclasses import replace
from pathlib import Path

import pyarrow as pa
import pyarrow.compute as pc

from compactor.errors import TableReadError, UsageError
from compactor.formats import get_format
from compactor.formats.checkpoint import inspect_checkpoint
from compactor.formats.discover import format_at
from compactor.models.inspect import (
    BUCKET_LABELS,
    BUCKETS,
    SMALL_FILE_DEFAULT,
    InspectReport,
    InspectSettings,
    PartitionHealth,
    SinkLogSettings,
)
from compactor.models.state import TableState
from compactor.models.table import TableLocation
from compactor.policy.model import TablePolicy
from compactor.project.model import ProjectOptions
from compactor.runtime.secrets import register_secrets


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
    t = pa.table({"k": keys, "size": files.column("size_bytes")})
    out = []
    for k in sorted(set(keys)):
        sizes = t.filter(pc.equal(t.column("k"), k)).column("size")
        out.append(PartitionHealth(k or "(unpartitioned)", len(sizes), int(pc.sum(sizes).as_py() or 0),
                                   int(pc.sum(pc.less(sizes, small)).as_py() or 0), _histogram(sizes)))
    return tuple(out)


def inspect_path(path: str, storage_options: Mapping[str, str] | None = None, *,
                 settings: InspectSettings | None = None, horizon: int | None = None,
                 table_policy: TablePolicy | None = None) -> InspectReport:
    """``settings``: those of the compactor policy that manages the table, to compare against
    (compact_interval, min_batches_to_retain, retention, min_file_size); ``table_policy``: that policy (the
    report then says what the planner would do). ``horizon``: how many of the newest commits to scan for
    duplicate rewrites. ``path``: a local path or an object-store URI (``storage_options`` reach it)."""
    register_secrets(storage_options)
    so: Mapping[str, str] = storage_options or {}
    fmt = format_at(path, so)
    if fmt is None:
        checkpoint = inspect_checkpoint(path, so, settings or InspectSettings())
        if checkpoint is not None:
            return checkpoint
        raise TableReadError(f"{path}: not a Delta table, a file-sink output (_spark_metadata) or a streaming "
                             "checkpoint (offsets/, commits/, sources/)")
    given = settings or InspectSettings()
    small = int(given.min_file_size or SMALL_FILE_DEFAULT)
    where = TableLocation(path, so)
    state = fmt.read_state(where)
    found = fmt.inspect(where, state, settings=settings, horizon=horizon)
    parts = _partitions(state, small)
    n_small = sum(p.small_files for p in parts)
    share = n_small / state.file_count if state.file_count else 0.0
    # under a policy the planner decides (what `compactor plan` says), not a small-file share
    planned = _planned(table_policy, path, so)
    recs = [planned] if planned else []
    if planned is None and n_small and share >= 0.5:
        recs.append(f"{share:.0%} of files are small: compact them (`compactor plan` then `compactor apply`)")
    return InspectReport(path, fmt.name, state.file_count, state.total_bytes, small, n_small, parts, found.logs,
                         given, (*recs, *found.recommendations), found.duplicates, found.log_window, found.warnings)


def _planned(table_policy: TablePolicy | None, path: str, storage_options: Mapping[str, str]) -> str | None:
    """The planner's own verdict for the table under its policy (one source of truth with `plan`)."""
    if table_policy is None:
        return None
    fmt = get_format(table_policy.format)
    pol = replace(table_policy, path=path)
    state = fmt.read_state(TableLocation(path, storage_options), pol)
    plan = fmt.plan_table(pol, state, now=dt.datetime.now(dt.UTC), engine="local")
    if plan.error:
        return f"the policy's plan: error: {plan.error}"
    if plan.actions:
        kinds = Counter(a.type for a in plan.actions)
        return ("the policy's plan: " + ", ".join(f"{k} x{n}" for k, n in kinds.items())
                + f" (files {plan.files_before} -> {plan.files_after}); `compactor plan` then `compactor apply`")
    skips = Counter(s.reason for s in plan.skipped)
    return "the policy's plan: no change (" + ", ".join(f"{k} x{n}" for k, n in skips.items()) + ")"


# ----------------------------------------------------------------------------- under a project


def table_policy(options: ProjectOptions, table: str) -> TablePolicy:
    """The named table's policy in the project, its path resolved (discover entries expanded)."""
    from compactor.project.compile import compile_project
    from compactor.tasks.plan import expand_policies

    compiled = compile_project(options)
    pols = expand_policies(compiled.all_policies, compiled.project.root, compiled.target.storage_options, {},
                           target=compiled.target)
    pol = next((p for p in pols if p.name == table), None)
    if pol is None:
        raise UsageError(f"table {table!r} is not declared in {options.project_dir}",
                         hint="`compactor ls --project-dir DIR` lists the project's tables")
    return pol


def inspect_settings(policy: TablePolicy) -> InspectSettings:
    """The settings of ``policy`` that inspect compares the table against."""
    s = policy.sink
    sink = None if s is None else SinkLogSettings(s.compact_interval, s.min_batches_to_retain, s.retention)
    return InspectSettings(policy.compaction.min_file_size, sink)


def inspect_in_project(options: ProjectOptions, path: str, *, table: str | None = None,
                       horizon: int | None = None,
                       storage_options: Mapping[str, str] | None = None) -> InspectReport:
    """`compactor inspect PATH`: ``path`` is a table's location or the name of a table of the project
    (``options``); with ``table`` (or a table name as ``path``) the table is compared against its policy,
    and a ``path`` of "-" (or the table's name) is the policy's path. An object-store path is read with
    ``storage_options``, by default the target's."""
    if table is None and "/" not in path and "://" not in path and not Path(path).exists():
        table = path  # a table name of the project
    pol = table_policy(options, table) if table else None
    if pol is not None and (path in ("-", table) or not Path(path).exists() and "://" not in path):
        path = pol.path or path
    if storage_options is None:
        storage_options = {}
        if "://" in path and not path.startswith("file:"):
            from compactor.project.loader import target_storage_options

            storage_options = target_storage_options(options)
    return inspect_path(path, storage_options, settings=None if pol is None else inspect_settings(pol),
                        horizon=horizon, table_policy=pol)
