"""Health report of a Delta table, a file-sink output or a streaming checkpoint (`compactor inspect`).

Pure reading: file counts and a size histogram per partition, the small-file share, and for Spark
metadata logs the manifest growth, the derived compact interval, retained batch files and the driver
memory needed to load the manifest, with recommendations."""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.compute as pc

from compactor.errors import TableReadError
from compactor.formats.file_sink.log import list_log, source_entries_table
from compactor.models.inspect import (
    BUCKET_LABELS,
    BUCKETS,
    BYTES_PER_ENTRY,
    SMALL_FILE_DEFAULT,
    InspectReport,
    LogHealth,
    PartitionHealth,
)
from compactor.models.state import TableState
from compactor.runtime.secrets import register_secrets
from compactor.runtime.storage import storage_for


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


def _log_health(directory: Path | str, entries: int, storage_options: Mapping[str, str] | None = None) -> LogHealth:
    log = list_log(directory, storage_options)
    compacts = log.compacts
    growth = None
    if len(compacts) >= 2 and compacts[-1].batch > compacts[-2].batch:
        growth = (compacts[-1].size - compacts[-2].size) / (compacts[-1].batch - compacts[-2].batch)
    lc = log.latest_compact
    return LogHealth(str(directory), len(log.files), log.latest_batch, lc.name if lc else None,
                     log.compact_interval(), entries, lc.size if lc else 0, growth,
                     sum(1 for f in log.files if not f.compact), entries * BYTES_PER_ENTRY)


def _recommend(report_logs: list[LogHealth], policy: Mapping[str, Any], kind: str, small_share: float,
               small_files: int) -> list[str]:
    recs = []
    if small_files and small_share >= 0.5:
        recs.append(f"{small_share:.0%} of files are small: compact them (`compactor plan` then `compactor apply`)")
    for lh in report_logs:
        want = policy.get("compact_interval")
        if want and lh.compact_interval != want:
            recs.append(f"{lh.directory}: derived compact interval {lh.compact_interval} differs from the policy's "
                        f"{want}; set spark.sql.streaming.fileSink.log.compactInterval={want} (`compactor compile`)")
        keep = policy.get("min_batches_to_retain")
        if keep and lh.retained_batch_files > keep + lh.compact_interval:
            recs.append(f"{lh.directory}: {lh.retained_batch_files} batch files retained, more than "
                        f"min_batches_to_retain={keep}: check spark.sql.streaming.fileSink.log.deletion/cleanupDelay")
        if lh.estimated_driver_memory_bytes > 512 << 20:
            recs.append(f"{lh.directory}: the manifest needs ~{lh.estimated_driver_memory_bytes >> 20} MiB of driver "
                        "memory to load")
        if "sources" in Path(lh.directory).parts:
            recs.append(f"{lh.directory}: the file-source log is never pruned by Spark: set the source option "
                        "maxFileAge and cleanSource (archive/delete) to bound it")
        elif lh.entries > 10_000 and not policy.get("retention"):
            recs.append(f"{lh.directory}: {lh.entries} manifest entries and no retention: set the sink writeStream "
                        "option `retention` (e.g. 30d) or plan `sink_prune`")
        if lh.compact_interval < 3 and lh.log_files > 0:
            recs.append(f"{lh.directory}: compact interval {lh.compact_interval} rewrites the whole manifest almost "
                        "every batch: raise spark.sql.streaming.fileSink.log.compactInterval")
    return recs


def inspect_path(path: str, storage_options: Mapping[str, str] | None = None, *,
                 policy: Mapping[str, Any] | None = None, horizon: int | None = None,
                 table_policy: Any = None) -> InspectReport:
    """``policy`` (optional): the settings of the compactor policy that manages the table, to compare
    against (compact_interval, min_batches_to_retain, retention, min_file_size). ``horizon``: how many of
    the newest Delta commits to scan for duplicate rewrites. ``path``: a local path or an object-store URI
    (``storage_options`` reach it)."""
    policy_given = policy is not None
    register_secrets(storage_options)
    st = storage_for(path, storage_options)
    policy = dict(policy or {})
    small = int(policy.get("min_file_size") or SMALL_FILE_DEFAULT)

    def sub(*parts: str) -> str:
        return "/".join([str(path).rstrip("/"), *parts])

    if st.is_dir("_delta_log"):
        from compactor.formats.delta.state import read_delta_state

        state = read_delta_state(path, storage_options)
        report = _data_report(path, "delta", state, small, [], policy, planned=_planned(table_policy, path,
                                                                                        storage_options))
        return _delta_extras(report, state, storage_options, policy_given, horizon)
    if st.is_dir("_spark_metadata"):
        from compactor.formats.file_sink.state import read_sink_state, sink_facts

        state = read_sink_state(path, storage_options)
        lh = _log_health(sub("_spark_metadata"), sink_facts(state).compact_entries, storage_options)
        return _data_report(path, "spark_file_sink", state, small, [lh], policy,
                            planned=_planned(table_policy, path, storage_options))
    _, dirs = st.list_dir("")
    names = {d.rsplit("/", 1)[-1] for d in dirs}
    if names & {"offsets", "commits", "sources"}:
        logs = []
        for d in st.list_dir("sources")[1] if "sources" in names else []:
            if st.list_dir(d)[0]:
                mlog = list_log(sub(d), storage_options)
                if mlog.files:
                    logs.append(_log_health(sub(d), source_entries_table(mlog).num_rows, storage_options))
        for s in ("offsets", "commits"):
            if s in names:
                logs.append(_log_health(sub(s), 0, storage_options))
        recs = _recommend([lh for lh in logs if "sources" in Path(lh.directory).parts], policy, "checkpoint", 0, 0)
        return InspectReport(path, "checkpoint", logs=tuple(logs), policy=policy, recommendations=tuple(recs))
    raise TableReadError(f"{path}: not a Delta table, a file-sink output (_spark_metadata) or a streaming "
                         "checkpoint (offsets/, commits/, sources/)")


AUTO_COMPACT = "delta.autoOptimize.autoCompact"


def _delta_extras(report: InspectReport, state: TableState, storage_options: Mapping[str, str] | None,
                  policy_given: bool, horizon: int | None) -> InspectReport:
    """Duplicate rewrites in the log, and a warning when auto compaction races compactor."""
    from dataclasses import replace

    from compactor.formats.delta.repair import DEFAULT_HORIZON, detect

    warnings: list[str] = []
    recs = list(report.recommendations)
    found = detect(state.uri, storage_options, version=state.version, horizon=horizon or DEFAULT_HORIZON)
    dups = tuple(d.to_dict() for d in found.history)
    open_ = [d for d in dups if d["status"] == "open"]
    if open_:
        rows = sum(d["rows"] or 0 for d in open_)
        warnings.append(f"{len(open_)} duplicate rewrite(s): rows are live twice ({rows:,} known): another "
                        "compaction removed files a compaction had already removed; run `compactor repair "
                        f"{state.uri}`")
    auto = str(state.properties.get(AUTO_COMPACT, "false")).strip().lower()
    if auto not in ("false", "off", "0", ""):
        msg = (f"{AUTO_COMPACT}={auto}: the writers' auto compaction rewrites the same small files as compactor "
               "and can race it (duplicate rewrites); set it to false, or schedule it apart (README, Safety model)")
        (warnings if policy_given else recs).append(msg if policy_given else f"if compactor manages this table: {msg}")
    return replace(report, duplicates=dups, log_window=found.window().to_dict(), warnings=tuple(warnings),
                   recommendations=tuple(recs))


def _planned(table_policy: Any, path: str, storage_options: Mapping[str, str] | None) -> str | None:
    """The planner's own verdict for the table under its policy (one source of truth with `plan`)."""
    if table_policy is None:
        return None
    import datetime as dt
    from collections import Counter
    from dataclasses import replace

    from compactor.formats import get_format

    fmt = get_format(table_policy.format)
    pol = replace(table_policy, path=path)
    state = fmt.read_state(path, storage_options or {}, pol)
    plan = fmt.plan_table(pol, state, now=dt.datetime.now(dt.UTC), engine="local")
    if plan.error:
        return f"the policy's plan: error: {plan.error}"
    if plan.actions:
        kinds = Counter(a.type for a in plan.actions)
        return ("the policy's plan: " + ", ".join(f"{k} x{n}" for k, n in kinds.items())
                + f" (files {plan.files_before} -> {plan.files_after}); `compactor plan` then `compactor apply`")
    skips = Counter(s.reason for s in plan.skipped)
    return "the policy's plan: no change (" + ", ".join(f"{k} x{n}" for k, n in skips.items()) + ")"


def _data_report(path: str, kind: str, state: TableState, small: int, logs: list[LogHealth],
                 policy: dict[str, Any], planned: str | None = None) -> InspectReport:
    parts = _partitions(state, small)
    n_small = sum(p.small_files for p in parts)
    share = n_small / state.file_count if state.file_count else 0.0
    # under a policy the planner decides (what `compactor plan` says), not a small-file share
    recs = ([planned] if planned else []) + _recommend(logs, policy, kind, share if planned is None else 0.0,
                                                        n_small)
    from compactor.formats.file_sink.state import sink_facts

    if sink_facts(state).delete_entries:
        recs.append(f"the manifest has {sink_facts(state).delete_entries} 'delete' entries: Spark >= 3.1 ignores them "
                    "and lists those files again")
    return InspectReport(path, kind, state.file_count, state.total_bytes, small, n_small, parts, tuple(logs),
                         policy, tuple(recs))
