"""Apply one planned ``compact`` action to an Iceberg table with the spark engine: the exact-bin rewrite of
spark_rewrite.py, journaled (the action's own output folder is named before Spark writes a file into it),
checked against the table's head before the commit (the planned files still live, their deletes
unchanged), fenced, and committed as one ``replace`` snapshot. A refused or failed action deletes the
files Spark wrote that no snapshot references, through the deletion gate (recovery.py); a commit whose
outcome the catalog did not report keeps them for the next run's recovery."""

from __future__ import annotations

import logging
import uuid
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from compactor.errors import ApplyError
from compactor.formats.base import ActionContext, ActionOutcome
from compactor.formats.iceberg.live import stranded_deletes
from compactor.formats.iceberg.read import iceberg_state
from compactor.formats.iceberg.recovery import recover
from compactor.formats.iceberg.replace import CommitOutcomeUnknown, StaleReplaceError, stale_problems
from compactor.formats.iceberg.rewrite import verify_output
from compactor.formats.iceberg.spark import java_table
from compactor.formats.iceberg.spark_rewrite import SparkBin, SparkRewrite, check_runtime
from compactor.models.results import ActionDetails
from compactor.models.state import TableState
from compactor.planning.actions import CompactAction
from compactor.runtime.faults import crash_point
from compactor.runtime.journal import OWNED_PREFIX, ActionJournal

if TYPE_CHECKING:
    from pyiceberg.table import Table

    from compactor.formats.iceberg.state import IcebergState

log = logging.getLogger(__name__)


def run_compact_spark(action: CompactAction, ctx: ActionContext, planned: TableState, table: Table) -> ActionOutcome:
    st = iceberg_state(planned)
    location = ctx.location
    spark = getattr(ctx.engine(), "spark", None)
    if spark is None:
        raise ApplyError(f"{st.identifier}: the spark engine has no Spark session for Iceberg's rewrite")
    check_runtime(spark)
    with java_table(spark, location) as jtable:
        return _run(action, ctx, st, table, spark, jtable)


def _run(action: CompactAction, ctx: ActionContext, st: IcebergState, table: Table, spark: Any,
         jtable: Any) -> ActionOutcome:
    location = ctx.location
    rel = f"data/{OWNED_PREFIX}{uuid.uuid4().hex}"
    folder = f"{table.location().rstrip('/')}/{rel}"
    key = ctx.commit_metadata.get("compactor.action") or f"iceberg-{uuid.uuid4().hex}"
    entry = ActionJournal(location.uri, ctx.commit_metadata.get("compactor.run_id", ""), key, st.snapshot_id,
                          owned=[rel], storage_options=location.storage_options)
    bins: list[SparkBin] = []
    committed = False

    def verify(paths: Sequence[str], rows: Sequence[int], out: str) -> None:
        verify_output(table, st, paths, rows, out)

    try:
        with entry:
            crash_point("iceberg.journal_written")
            rewrite = SparkRewrite(spark, jtable, st, folder)
            rows = rewrite.rows_after_deletes(action.input_paths)
            for b in action.bins:
                bins.append(rewrite.rewrite_bin(b, rows, verify))
                if ctx.on_bin_done is not None:
                    ctx.on_bin_done(sum(st.file(p).size for p in b))
            crash_point("iceberg.outputs_written")
            removed = [p for b in bins for p in b.inputs]
            table.refresh()
            problems = stale_problems(table, st, removed, [], removes_deletes=True)
            if problems:
                raise StaleReplaceError(f"{st.identifier}: not committed, the plan is stale: {'; '.join(problems)}",
                                        hint="plan again")
            stranded = sorted(stranded_deletes(st.live, table.io, set(removed)))
            if ctx.fence is not None:
                ctx.fence()
            snapshot_id = rewrite.commit(bins, stranded, ctx.commit_metadata)
            committed = True
            crash_point("iceberg.after_commit")
    except CommitOutcomeUnknown:
        raise  # the outputs stay: the commit may have landed (the next run's recovery judges them)
    except BaseException:
        if not committed:
            try:  # this run's entry says it ended: the files Spark wrote that no snapshot references go
                recover(location, 0.0)
            except Exception as e:  # noqa: BLE001 - the next run's recovery tries again; the refusal stands
                log.warning("%s: could not delete the outputs of a refused rewrite yet: %s", location.identifier, e)
        raise
    sizes = {f.path: f.size for f in st.files}
    added = [b.output_path for b in bins if b.output_path is not None]
    return ActionOutcome(
        files_removed=len(removed), files_added=len(added), bytes_removed=sum(sizes[p] for p in removed),
        bytes_added=sum(b.output_size for b in bins), rows_removed=sum(b.rows_in - b.rows_deleted for b in bins),
        rows_added=sum(b.rows_out for b in bins), version_before=st.snapshot_id, version_after=snapshot_id,
        removed_paths=tuple(removed), added_paths=tuple(added),
        details=ActionDetails(method="rewrite", bins=len(bins)))
