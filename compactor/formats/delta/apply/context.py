"""What every Delta action needs: the table handle kept for the table's actions, the planned inputs as
they are now, the refusals, the fence."""


from __future__ import annotations

import logging
from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any

import pyarrow as pa

from compactor.engines.base import RewriteEngine
from compactor.engines.sql_engine import SqlEngine
from compactor.errors import (
    PlanError,
    UnsupportedTableError,
)
from compactor.formats.base import ActionContext
from compactor.formats.delta.apply.commit import (
    RemovedFile,
)
from compactor.formats.delta.apply.log_writer import writes_directly
from compactor.formats.delta.apply.session import DeltaSession, session_of
from compactor.formats.delta.plan.support import (
    DELTA_RS_UNWRITABLE,
    REWRITES_DELETION_VECTORS,
    maps_columns,
    unsupported_reason,
)
from compactor.formats.delta.read.column_mapping import (
    ColumnMappingError,
    mapping_mode,
    physical_names,
    physical_schema,
)
from compactor.formats.delta.read.facts import delta_facts
from compactor.models.state import TableState
from compactor.models.table import TableLocation
from compactor.planning.actions import (
    Action,
    RewriteAction,
    ZOrderAction,
)

if TYPE_CHECKING:  # pragma: no cover
    from deltalake import DeltaTable

log = logging.getLogger(__name__)


def handle(ctx: ActionContext) -> DeltaTable:
    """The table's DeltaTable, brought up to date (kept in the table run's session)."""
    return session_of(ctx).open_table()


def check_writable(ctx: ActionContext) -> None:
    feats = set(delta_facts(ctx.state).protocol.writer_features) & DELTA_RS_UNWRITABLE
    if feats:
        raise UnsupportedTableError(f"{ctx.table.name}: delta-rs cannot write tables with writer feature(s) "
                                    f"{', '.join(sorted(feats))}")


def planned_inputs(state: TableState, action: Action, session: DeltaSession | None = None) -> dict[str, RemovedFile]:
    """The planned input files as they are in ``state``, checked to lie in the action's partition (an
    edited plan could otherwise move files of one partition into another's folder). ``session``: keeps the
    state's path index for the table's next actions."""
    index = (session or DeltaSession(TableLocation(state.uri))).index(state)
    rows = [index.rows[p] for p in action.input_paths if p in index.rows]
    paths, sizes, records = index.column("path"), index.column("size_bytes"), index.column("num_records")
    partition = [(c, index.column(f"partition.{c}")) for c in state.partition_columns]
    out: dict[str, RemovedFile] = {}
    # a bin-pack compaction rewrites only small files (and files with deleted rows): apply accepts no
    # input the planner would not have chosen from the table as it is now
    small_below = action.min_file_size if isinstance(action, RewriteAction) and \
        type(action).strategy == "bin_pack" else None
    forced = delta_facts(state).with_deletion_vector
    for i in rows:
        path, size = paths[i], int(sizes[i])
        pv = {c: values[i] for c, values in partition}
        if pv != dict(action.partition):
            raise PlanError(f"planned file {path} is in partition {pv}, not in the action's partition "
                            f"{dict(action.partition)}: the plan was edited", hint="re-run `compactor plan`")
        if small_below is not None and size >= small_below and path not in forced:
            raise PlanError(f"planned file {path} ({size} bytes) is not below min_file_size "
                            f"{small_below}: compactor would not compact it; the plan was edited",
                            hint="re-run `compactor plan`")
        out[path] = RemovedFile(path, size, pv, records[i])
    return out


def refuse_unrewritable(ctx: ActionContext, inputs: Mapping[str, RemovedFile], engine: RewriteEngine) -> None:
    """Never rewrite a file with a deletion vector on an engine whose rewrite of them is not proved
    (support.REWRITES_DELETION_VECTORS; a plain read brings deleted rows back, and a remove without the
    DV's id matches nothing), nor one whose log path delta-rs cannot write back where delta-rs commits."""
    dv = delta_facts(ctx.state).with_deletion_vector & set(inputs)
    if dv and engine.name not in REWRITES_DELETION_VECTORS:
        raise UnsupportedTableError(f"{ctx.table.name}: {len(dv)} planned file(s) carry deletion vectors "
                                    f"(deletionVectors), e.g. {sorted(dv)[0]}; compactor's rewrite cannot copy them",
                                    hint="compact them with the spark engine's native OPTIMIZE")
    raw = delta_facts(ctx.state).unremovable_paths & set(inputs)
    if raw and not writes_directly(handle(ctx), ctx.location):
        raise UnsupportedTableError(f"{ctx.table.name}: {len(raw)} planned file(s) have a log path delta-rs cannot "
                                    f"write back (e.g. {sorted(raw)[0]}), and compactor cannot write this table's "
                                    "commits itself (a locking store)",
                                    hint="compact them with the spark engine's native OPTIMIZE")


def data_schema(dt: DeltaTable, partition_columns: Sequence[str]) -> pa.Schema:
    """The table's data columns as written in data files: the Delta schema without partition columns, in
    its physical names and field ids where the table maps columns (formats/delta/read/column_mapping.py)."""
    schema = pa.schema(dt.schema().to_arrow())
    data = pa.schema([f for f in schema if f.name not in set(partition_columns)])
    mode = mapping_mode(dict(dt.metadata().configuration or {}))
    try:
        return physical_schema(data, dt.schema().to_json(), mode)
    except ColumnMappingError as e:
        raise UnsupportedTableError(f"{dt.table_uri}: column mapping mode {mode}: {e}") from None


def column_names(dt: DeltaTable) -> dict[str, str]:
    """Each top-level column's name as data files, folders and partitionValues spell it (its physical
    name under column mapping) by its logical name."""
    mode = mapping_mode(dict(dt.metadata().configuration or {}))
    try:
        return physical_names(dt.schema().to_json(), mode)
    except ColumnMappingError as e:
        raise UnsupportedTableError(f"{dt.table_uri}: column mapping mode {mode}: {e}") from None


def fence(ctx: ActionContext) -> None:
    """The lease check right before a side effect on the table (runtime/lease.py)."""
    if ctx.fence is not None:
        ctx.fence()


def only_native_can(action: RewriteAction, state: TableState) -> bool:
    """Whether only delta-spark's OPTIMIZE can do ``action`` on this table: a z-order, a table feature
    compactor's rewrite or delta-rs' commit cannot carry (clustering, row tracking, column mapping, ...),
    or an input file with a deletion vector or a log path delta-rs cannot write back."""
    if isinstance(action, ZOrderAction) or unsupported_reason(state, "spark") or maps_columns(state):
        return True  # (the spark engine's rewrite compacts column-mapped tables; auto leaves them to OPTIMIZE)
    facts = delta_facts(state)
    raw = frozenset() if facts.compactor_commits else facts.unremovable_paths
    return bool((facts.with_deletion_vector | raw).intersection(action.input_paths))


def uses_native(action: RewriteAction, engine: RewriteEngine, uri: str = "", state: TableState | None = None) -> bool:
    """Whether ``action`` runs as delta-spark's OPTIMIZE. ``method: auto`` (the default) takes compactor's
    own rewrite (Spark writes the planned bins, delta-rs commits after its checks: 0.57x a hand-run
    OPTIMIZE in bench/spark_scale.py, against 1.15x for OPTIMIZE in commit groups) unless only OPTIMIZE
    can do the job (``only_native_can``; ``state`` None: not known, OPTIMIZE)."""
    from compactor.formats.delta.spark import delta_sql_available, native_commits_safe

    if not isinstance(engine, SqlEngine) or action.method == "rewrite":
        return False
    available = delta_sql_available(engine)
    if action.method == "optimize" and not available:
        raise UnsupportedTableError("compaction.method optimize needs the Delta Lake jars in the Spark session",
                                    hint="set spark.delta_jars in the profile, or use method rewrite")
    if action.method == "optimize" or not available:
        return available
    if state is not None and not only_native_can(action, state):
        return False
    if not native_commits_safe(engine, uri):
        log.info("%s: delta-spark's S3 log store is single-driver: rewriting and committing through delta-rs", uri)
        return False
    return True


REWRITE_GROUP = "rewrite"


def group_key(action: Action, state: TableState, engine: RewriteEngine, uri: str) -> Any:
    """Actions with the same key may share one commit (None: the action runs on its own). "rewrite": a
    compaction or sort through compactor's rewrite pipeline, on files it can rewrite; ("optimize", ...):
    delta-spark OPTIMIZE with the same settings, run once over the group's partitions."""
    if not isinstance(action, RewriteAction):
        return None
    if uses_native(action, engine, uri, state):
        if "clustering" in delta_facts(state).protocol.writer_features:
            return None  # OPTIMIZE of a clustered table takes no partition predicate
        return ("optimize", action.target_file_size, action.min_file_size, action.max_deleted_rows_ratio,
                tuple(action.z_order_by) if isinstance(action, ZOrderAction) else ())
    if isinstance(action, ZOrderAction) or unsupported_reason(state, engine.name):
        return None
    facts = delta_facts(state)
    raw = frozenset() if facts.compactor_commits else facts.unremovable_paths
    blocked = raw if engine.name in REWRITES_DELETION_VECTORS else facts.with_deletion_vector | raw
    return None if blocked and blocked.intersection(action.input_paths) else REWRITE_GROUP
