"""Build a plan: the pure core (build_plan) and the I/O shell around it (plan_project)."""

from __future__ import annotations

import datetime as dt
import logging
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import TYPE_CHECKING, Any, Callable, Mapping, Sequence

from compactor import __version__
from compactor.errors import CompactorError, TableReadError
from compactor.planning.partitions import plan_partitions
from compactor.planning.plan import REWRITE_ACTIONS, Plan, Skip, TablePlan, compute_totals
from compactor.planning.retention import plan_retention
from compactor.policy.model import TablePolicy
from compactor.policy.predicate import PredicateError, parse_where
from compactor.project.model import Target
from compactor.state.model import TableState

if TYPE_CHECKING:  # pragma: no cover
    from compactor.api import ProjectOptions

log = logging.getLogger(__name__)

#: writer features delta-rs 1.6 cannot write (its commits would corrupt or be refused)
DELTA_RS_UNWRITABLE = frozenset({
    "clustering", "liquid", "rowTracking", "domainMetadata", "inCommitTimestamp", "identityColumns",
    "typeWidening", "typeWidening-preview", "catalogManaged", "catalogOwned-preview", "icebergCompatV1",
    "icebergCompatV2", "icebergWriterCompatV1", "variantType", "variantType-preview",
})
#: features whose data files cannot be rewritten blindly by compactor's own rewrite paths
UNREWRITABLE = frozenset({"deletionVectors", "columnMapping"})


def bin_model_for(target: Target, policy: TablePolicy) -> str:
    return "delta-rs" if target.engine == "local" else "delta-spark"


def unsupported_reason(state: TableState, engine: str) -> str | None:
    feats = set(state.protocol.writer_features) | set(state.protocol.reader_features)
    bad = sorted(feats & DELTA_RS_UNWRITABLE)
    if bad:
        return f"writer feature(s) {', '.join(bad)} cannot be written by delta-rs, which commits compactor's changes"
    bad = sorted(feats & UNREWRITABLE)
    if state.properties.get("delta.columnMapping.mode", "none") not in ("none", None):
        bad = sorted(set(bad) | {"columnMapping"})
    if bad:
        return f"table uses {', '.join(bad)}: its data files cannot be rewritten safely by compactor"
    return None


def plan_table(policy: TablePolicy, state: TableState | Exception, *, now: dt.datetime, target: Target) -> TablePlan:
    engine = target.engine
    path = policy.path or policy.name
    src = str(policy.source)
    if isinstance(state, Exception):
        msg = str(state)
        return TablePlan(policy.name, path, policy.format, engine, None, error=msg, policy_source=src,
                         skipped=(Skip("unreadable", None, {}, msg),))
    if policy.format == "spark_file_sink":
        return _plan_sink(policy, state, now=now, engine=engine)
    model = bin_model_for(target, policy)
    base = dict(name=policy.name, path=state.uri, format=policy.format, engine=engine, version=state.version,
                bin_model=model, partition_columns=state.partition_columns, files_before=state.file_count,
                bytes_before=state.total_bytes, policy_source=src)
    if not policy.enabled:
        return TablePlan(**base, files_after=state.file_count,
                         skipped=(Skip("disabled", None, {}, "table policy has enabled: false"),))
    reason = unsupported_reason(state, engine)
    if reason:
        return TablePlan(**base, files_after=state.file_count, skipped=(Skip("unsupported", None, {}, reason),))
    c = policy.compaction
    where = None
    if c.partitions.where:
        try:
            where = parse_where(c.partitions.where)
        except PredicateError as e:
            return _config_error(base, state, f"{policy.location('compaction.partitions.where')}: {e}")
        extra = sorted(where.columns - set(state.partition_columns))
        if extra:
            return _config_error(base, state, (
                f"{policy.location('compaction.partitions.where')}: where references non-partition column(s) "
                f"{', '.join(extra)}; partition columns are: {', '.join(state.partition_columns) or '(none)'}"))
    lb = c.partitions.lookback
    if lb is not None and lb.column not in state.partition_columns:
        return _config_error(base, state, f"{policy.location('compaction.partitions.lookback')}: lookback column "
                             f"'{lb.column}' is not a partition column ({', '.join(state.partition_columns) or 'none'})")
    actions, skips = [], []
    if c.enabled:
        acts, sk = plan_partitions(state.files, state.partition_columns, c, now=now, bin_model=model,
                                   version=state.version, where=where)
        actions += acts
        skips += sk
    else:
        skips.append(Skip("disabled", None, {}, "compaction.enabled is false"))
    if policy.retention is not None:
        acts, sk = plan_retention(policy.retention, state)
        actions += acts
        skips += sk
    removed = sum(a.input_files - a.expected_output_files for a in actions if a.type in REWRITE_ACTIONS)
    return TablePlan(**base, actions=tuple(actions), skipped=tuple(skips), files_after=state.file_count - removed)


def _config_error(base: dict, state: TableState, msg: str) -> TablePlan:
    return TablePlan(**base, files_after=state.file_count, error=msg, skipped=(Skip("invalid_policy", None, {}, msg),))


def _plan_sink(policy: TablePolicy, state: TableState, *, now: dt.datetime, engine: str) -> TablePlan:
    try:
        from compactor.sink.planning import plan_sink_table
    except ImportError:
        msg = "file-sink planning is not available in this build"
        return TablePlan(policy.name, state.uri, policy.format, engine, state.version, error=msg,
                         skipped=(Skip("unsupported", None, {}, msg),))
    return plan_sink_table(policy, state, now=now, engine=engine)


def build_plan(policies: Sequence[TablePolicy], states: Mapping[str, TableState | Exception], *,
               now: dt.datetime, target: Target, project_name: str,
               invocation: Mapping[str, Any] | None = None) -> Plan:
    """PURE: policies + table states + now -> Plan. states are keyed by policy name."""
    tables = []
    for p in policies:
        state = states.get(p.name)
        if state is None:
            state = TableReadError(f"{p.name}: no table state was read")
        tables.append(plan_table(p, state, now=now, target=target))
    tables_t = tuple(tables)
    return Plan(compactor_version=__version__, generated_at=now.astimezone(dt.timezone.utc).isoformat(),
                project=project_name, target=target.redacted(), tables=tables_t, totals=compute_totals(tables_t),
                invocation=dict(invocation or {}))


# ----------------------------------------------------------------------------- the I/O shell


def resolve_path(path: str, root: Path) -> str:
    from compactor.state.delta import is_uri

    if is_uri(path) or Path(path).is_absolute():
        return path
    return str((root / path).resolve())


def expand_policies(policies: Sequence[TablePolicy], root: Path, storage_options: Mapping[str, str],
                    errors: dict[str, Exception] | None = None) -> list[TablePolicy]:
    """Resolve relative paths against the project root and expand `discover` entries into tables.

    A discover that fails (missing root, object store) keeps its policy, unexpanded, and records the
    error in `errors` under the policy's name, so one bad root never stops the other tables; without
    `errors` the error is raised."""
    from dataclasses import replace

    from compactor.state.discover import discover_tables

    out: list[TablePolicy] = []
    for p in policies:
        if p.discover is not None:
            base = resolve_path(p.discover.root, root)
            try:
                found = discover_tables(base, p.discover.include, p.discover.exclude, storage_options, fmt=p.format)
            except CompactorError as e:
                if errors is None:
                    raise
                errors[p.name] = e
                out.append(replace(p, path=base))
                continue
            for rel in found:
                out.append(replace(p, name=f"{p.name}/{rel}", path=f"{base.rstrip('/')}/{rel}", discover=None))
        elif p.path is not None:
            out.append(replace(p, path=resolve_path(p.path, root)))
        else:
            out.append(p)
    return out


def read_state(policy: TablePolicy, target: Target) -> TableState | Exception:
    try:
        if policy.is_catalog_table:
            if target.engine != "spark":
                raise TableReadError(f"'{policy.name}' is a catalog table (no path): it needs the spark engine")
            from compactor.engines.spark_session import resolve_catalog_path

            policy_path = resolve_catalog_path(policy.name, target.spark)
            from compactor.state.delta import read_delta_state

            return read_delta_state(policy_path, target.storage_options)
        if policy.format == "spark_file_sink":
            from compactor.sink.state import read_sink_state

            return read_sink_state(policy.path, target.storage_options)
        from compactor.state.delta import read_delta_state

        state = read_delta_state(policy.path, target.storage_options)
        if policy.enabled and policy.retention is not None and policy.retention.vacuum.enabled:
            from dataclasses import replace

            state = replace(state, vacuum_candidates=_vacuum_candidates(policy, target))
        return state
    except CompactorError as e:
        return e
    except ImportError as e:
        return TableReadError(f"{policy.name}: support for this table kind is not available ({e})")
    except Exception as e:  # noqa: BLE001 - one unreadable table must not stop the plan
        return TableReadError(f"{policy.name}: {type(e).__name__}: {e}")


def _vacuum_candidates(policy: TablePolicy, target: Target) -> int | None:
    from deltalake import DeltaTable

    assert policy.retention is not None
    hours = max(1, -(-policy.retention.deleted_file_retention // 3600))
    try:
        dt_ = DeltaTable(policy.path, storage_options=dict(target.storage_options) or None)
        return len(dt_.vacuum(retention_hours=hours, dry_run=True, enforce_retention_duration=False))
    except Exception:  # noqa: BLE001 - a count we cannot get is reported as unknown
        return None


def plan_project(options: "ProjectOptions", *, now: dt.datetime | None = None, out: Path | None = None,
                 progress: Callable[[str, int, int], None] | None = None) -> Plan:
    from compactor.planning.io import write_plan
    from compactor.policy.compile import compile_project

    compiled = compile_project(options)
    now = now or dt.datetime.now(dt.timezone.utc)
    discover_errors: dict[str, Exception] = {}
    policies = expand_policies(compiled.policies, compiled.project.root, compiled.target.storage_options,
                               discover_errors)
    states: dict[str, TableState | Exception] = dict(discover_errors)
    to_read = [p for p in policies if p.enabled and p.name not in discover_errors]
    with ThreadPoolExecutor(max_workers=min(8, max(1, len(to_read)))) as pool:
        futures = {p.name: pool.submit(read_state, p, compiled.target) for p in to_read}
        for i, (name, fut) in enumerate(futures.items(), 1):
            states[name] = fut.result()
            if progress:
                progress(name, i, len(futures))
    for p in policies:
        if not p.enabled:
            states[p.name] = _disabled_state(p)
    plan = build_plan(policies, states, now=now, target=compiled.target, project_name=compiled.project.name,
                      invocation={"select": list(options.select), "exclude": list(options.exclude),
                                  "vars": {k: v for k, v in options.vars.items()}, "target": compiled.target.name})
    if out is not None:
        write_plan(plan, out)
    return plan


def _disabled_state(p: TablePolicy) -> TableState:
    from compactor.state.model import files_table

    return TableState(uri=p.path or p.name, format=p.format, version=None, partition_columns=(), files=files_table([]))
