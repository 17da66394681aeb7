"""Run a Delta ``purge`` (formats/delta/plan/purge_action.py) on the spark engine: delta-spark's
``REORG TABLE ... WHERE <partition> APPLY (PURGE)``, verified from the log afterwards as native OPTIMIZE is
(native.py: live rows removed == rows added, from the log's statistics and the deletion vectors'
cardinalities), and: no file it added carries a deletion vector; every planned file was removed with the
deletion vector it was planned with.

Before it runs, each planned file's deletion vector is compared with the table as it is now (a DELETE,
UPDATE or MERGE since planning leaves the path live but changes its vector): stale otherwise, nothing run.
REORG chooses its own files (every file of the partition with a deletion vector, and files still holding a
dropped column); one it rewrote that the plan did not list is reported, not refused: its rows are verified
with the rest."""

from __future__ import annotations

import json
from typing import Any

from compactor.engines.sql_engine import SqlEngine
from compactor.errors import UnsupportedTableError, VerificationError
from compactor.formats.base import ActionContext, ActionOutcome
from compactor.formats.delta.apply.commit import MARKER, find_commit
from compactor.formats.delta.apply.context import fence, handle
from compactor.formats.delta.apply.native import outcome_from_log
from compactor.formats.delta.plan.purge_action import PurgeAction
from compactor.formats.delta.read.deletion_vector_ids import logged_deletion_vectors
from compactor.formats.delta.read.facts import delta_facts
from compactor.formats.delta.read.log_replay import dv_key
from compactor.formats.delta.spark_sql import optimize_conf, reorg_purge_sql
from compactor.models.results import ActionDetails

METHOD = "native REORG ... APPLY (PURGE)"


def run_purge(action: PurgeAction, ctx: ActionContext) -> ActionOutcome:
    from compactor.formats.delta.spark import delta_sql_available

    engine: Any = ctx.engine()
    if not isinstance(engine, SqlEngine) or not delta_sql_available(engine):
        raise UnsupportedTableError(f"{ctx.table.name}: a purge of deletion vectors runs on the spark engine with "
                                    "the Delta jars (delta-spark's REORG TABLE ... APPLY (PURGE))",
                                    hint="apply with a target whose engine is spark and whose profile sets "
                                         "spark.delta_jars")
    dt = handle(ctx)
    read_version = dt.version()
    vectors = delta_facts(ctx.state).deletion_vectors
    if vectors is None or ctx.state.version != read_version:  # read at the version the REORG starts from
        vectors = logged_deletion_vectors(ctx.location, read_version)
    action.check_deletion_vectors(None if vectors is None else {p: v.id for p, v in vectors.items()})
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
    still = sorted(p for p, a in own.adds.items() if a.get("deletionVector"))
    if still:
        raise VerificationError(f"commit {own.version}: REORG ... APPLY (PURGE) added {len(still)} file(s) that still "
                                f"carry a deletion vector (e.g. {still[0]})")
    outcome = outcome_from_log(ctx, dt, own, read_version, records)
    removed = {p: dv_key(r.get("deletionVector")) for p, r in own.removes.items()}
    planned = action.deletion_vector_of()
    missed = sorted(p for p, dv in planned.items() if removed.get(p) != dv)
    if missed and outcome.details.repaired is None:
        raise VerificationError(f"commit {own.version}: the purge did not remove {len(missed)} planned file(s) with "
                                f"their planned deletion vector (e.g. {missed[0]})")
    extra = sorted(set(removed) - set(planned))
    outcome.details.sql, outcome.details.method = sql, METHOD
    if extra:
        outcome.details.note = (f"REORG also rewrote {len(extra)} file(s) the plan did not list (a deletion vector "
                                f"written since planning, or a dropped column), e.g. {extra[0]}; rows verified")
    return outcome
