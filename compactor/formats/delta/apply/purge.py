"""Run a Delta ``purge`` (formats/delta/plan/purge_action.py).

Before anything runs, on either engine, the files REORG would rewrite in the partition now must be the
planned ones (``check_selection``): each planned file's deletion vector still the planned one (a DELETE, UPDATE
or MERGE since planning leaves the path live but changes its vector), no other file of the partition with a
vector, no file added to it since planning holding a column the table lacks; stale otherwise, nothing run.

The spark engine runs delta-spark's ``REORG TABLE ... WHERE <partition> APPLY (PURGE)``, verified from the log
afterwards as native OPTIMIZE is (native.py: live rows removed == rows added, from the log's statistics and
the deletion vectors' cardinalities), and: no file it added carries a deletion vector; every planned file was
removed with the deletion vector it was planned with; a file it rewrote that the plan did not list (only a
commit racing the REORG can make one) is reported.

The local engine rewrites the purge's bins through compactor's own pipeline (apply/rewrite.py
``rewrite_group``, a group of one): each vector proved and its rows dropped (apply/deletes.py), the rows
dropped from each input checked against its planned cardinality, rows out == rows in - cardinalities per
bin from the footers before the commit, columns the table lacks left out (only the change data feed's, which
the footers prove empty: plan/support.py purge_droppable), and one dataChange=false commit recorded as
delta-spark records a REORG ... APPLY (PURGE); afterwards, from the log, every planned file removed with its
planned descriptor and no added file carrying a vector."""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any

from compactor.engines.base import RewriteEngine
from compactor.engines.sql_engine import SqlEngine
from compactor.errors import CompactorError, StalePlanError, UnsupportedTableError, VerificationError
from compactor.formats.base import ActionContext, ActionOutcome
from compactor.formats.delta.apply.commit import MARKER, find_commit
from compactor.formats.delta.apply.context import fence, handle
from compactor.formats.delta.apply.native import outcome_from_log
from compactor.formats.delta.apply.rewrite import rewrite_group
from compactor.formats.delta.plan.purge_action import PurgeAction
from compactor.formats.delta.plan.support import unsupported_reason
from compactor.formats.delta.read.deletion_vector_ids import DeletionVectorRef, logged_deletion_vectors
from compactor.formats.delta.read.extra_columns import files_with_extra_columns
from compactor.formats.delta.read.facts import delta_facts
from compactor.formats.delta.read.log import Commit, commits_after, read_commit
from compactor.formats.delta.read.log_replay import dv_key
from compactor.formats.delta.spark_sql import optimize_conf, reorg_purge_sql
from compactor.models.results import ActionDetails

METHOD = "native REORG ... APPLY (PURGE)"
LOCAL_METHOD = "rewrite (recorded as REORG ... APPLY (PURGE))"


def run_purge(action: PurgeAction, ctx: ActionContext) -> ActionOutcome:
    engine: Any = ctx.engine()
    if not isinstance(engine, SqlEngine):
        return _local_purge(action, ctx, engine)
    from compactor.formats.delta.spark import delta_sql_available

    if not delta_sql_available(engine):
        raise UnsupportedTableError(f"{ctx.table.name}: a purge of deletion vectors on the spark engine runs "
                                    "delta-spark's REORG TABLE ... APPLY (PURGE), which needs the Delta jars",
                                    hint="set spark.delta_jars in the profile, or apply with the local engine")
    dt = handle(ctx)
    read_version = dt.version()
    vectors = delta_facts(ctx.state).deletion_vectors
    if vectors is None or ctx.state.version != read_version:  # read at the version the REORG starts from
        vectors = logged_deletion_vectors(ctx.location, read_version)
    check_selection(action, ctx, vectors)
    records = dict(zip(ctx.state.files.column("path").to_pylist(), ctx.state.files.column("num_records").to_pylist()))
    sql = reorg_purge_sql(engine.hadoop_path(ctx.table.path), action.partition)
    # REORG packs as OPTIMIZE does (maxFileSize); its own minFileSize and ratio are 0 whatever the session says
    conf = {**optimize_conf(action.target_file_size, action.target_file_size),
            "spark.databricks.delta.commitInfo.userMetadata": json.dumps(dict(ctx.commit_metadata))}
    fence(ctx)
    with engine.session_conf(conf):
        engine.sql(sql)
    own = find_commit(ctx.location, read_version, ctx.commit_metadata[MARKER], timeout_s=1)
    if own is None:
        return ActionOutcome(version_before=read_version, version_after=read_version,
                             details=ActionDetails(note="REORG found nothing to purge", sql=sql, method=METHOD))
    outcome = outcome_from_log(ctx, dt, own, read_version, records)
    extra = verify_removed(action, own, repaired=outcome.details.repaired is not None)
    outcome.details.sql, outcome.details.method = sql, METHOD
    if extra:
        outcome.details.note = (f"REORG also rewrote {len(extra)} file(s) the plan did not list (a commit racing "
                                f"it gave them a deletion vector), e.g. {extra[0]}; rows verified")
    return outcome


def _local_purge(action: PurgeAction, ctx: ActionContext, engine: RewriteEngine) -> ActionOutcome:
    """The purge's bins rewritten by compactor's own pipeline (module docstring)."""
    reason = unsupported_reason(ctx.state, engine.name)
    if reason:
        raise UnsupportedTableError(f"{ctx.table.name}: {reason}")
    check_selection(action, ctx, delta_facts(ctx.state).deletion_vectors)
    (result,) = rewrite_group([action], ctx, engine)
    if isinstance(result, CompactorError):
        raise result
    if result.details.repaired is None and result.version_after is not None:
        own = read_commit(ctx.location, result.version_after)
        if own is None:
            raise VerificationError(f"the purge's commit {result.version_after} cannot be read back")
        verify_removed(action, own, repaired=False)
    result.details.method = LOCAL_METHOD
    return result


def check_selection(action: PurgeAction, ctx: ActionContext, vectors: Mapping[str, DeletionVectorRef] | None) -> None:
    """StalePlanError unless the files REORG would rewrite in the partition now (``vectors``: the table's
    live deletion vectors at ``ctx.state``'s version or later) are the planned ones (module docstring)."""
    action.check_deletion_vectors(None if vectors is None else {p: v.id for p, v in vectors.items()})
    assert vectors is not None
    state = ctx.state
    planned = set(action.input_paths)
    columns = [(c, state.files.column(f"partition.{c}").to_pylist()) for c in state.partition_columns]
    paths = state.files.column("path").to_pylist()
    wanted = dict(action.partition)
    here = {p for i, p in enumerate(paths) if {c: values[i] for c, values in columns} == wanted}
    vectored = sorted(p for p in here - planned if p in vectors and vectors[p].cardinality)
    if vectored:
        raise StalePlanError(f"{len(vectored)} file(s) of the partition got a deletion vector since planning (e.g. "
                             f"{vectored[0]}): REORG would rewrite them too", hint="re-run `compactor plan`")
    since = action.precondition.table_version
    added = sorted({p for c in commits_after(ctx.location, since) for p in c.adds} & here - planned) \
        if since is not None else []
    schema = delta_facts(state).schema_json
    extra = files_with_extra_columns(ctx.location, added, schema, state.properties) if added and schema else {}
    if extra:
        p, cols = next(iter(extra.items()))
        raise StalePlanError(f"{len(extra)} file(s) added to the partition since planning hold column(s) the table "
                             f"lacks (e.g. {p}: {', '.join(cols)}): REORG would rewrite them too",
                             hint="re-run `compactor plan`")


def verify_removed(action: PurgeAction, own: Commit, *, repaired: bool) -> list[str]:
    """From the purge's commit: no added file carries a deletion vector, and every planned file was removed
    with its planned deletion vector (VerificationError otherwise). Returns the files it removed that the
    plan did not list."""
    still = sorted(p for p, a in own.adds.items() if a.get("deletionVector"))
    if still:
        raise VerificationError(f"commit {own.version}: the purge added {len(still)} file(s) that still carry a "
                                f"deletion vector (e.g. {still[0]})")
    removed = {p: dv_key(r.get("deletionVector")) or "" for p, r in own.removes.items()}
    planned = action.deletion_vector_of()
    missed = sorted(p for p, dv in planned.items() if removed.get(p) != dv)
    if missed and not repaired:
        raise VerificationError(f"commit {own.version}: the purge did not remove {len(missed)} planned file(s) with "
                                f"their planned deletion vector (e.g. {missed[0]})")
    return sorted(set(removed) - set(planned))
