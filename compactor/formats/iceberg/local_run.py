"""Apply planned ``compact`` actions to an Iceberg table with the local engine (pyiceberg, no JVM), a commit
group at a time (the profile's ``commit_every_bins``/``commit_every_bytes``, as for Delta and the spark
engine): the table is read once at the planned snapshot, each bin rewritten into one verified file
(rewrite.py), and every bin of the group's fresh actions committed as one ``replace`` snapshot validated
from the planned snapshot (replace.py). One snapshot per group, not per action: each commit reads and
writes the table's manifests again, so 200 actions committed one by one took 8 minutes where one commit
takes seconds (bench/iceberg_compare.py).

An action a change since planning touched is left out as stale (checked before its bins are rewritten and
again before the commit); an action the local engine refuses (a bin it cannot rewrite exactly) fails on
its own; the others commit. Crash safety: a journal entry (runtime/journal.py) is on storage before any
output is written, and names each output before its file is created; the fence is checked right before
the commit. Outputs no commit took are deleted through the deletion gate; a commit whose outcome the
catalog did not report keeps them (they may be live): the next run's recovery judges them then."""

from __future__ import annotations

import logging
import uuid
from collections.abc import Sequence
from concurrent.futures import ThreadPoolExecutor
from typing import TYPE_CHECKING

from compactor.errors import CompactorError
from compactor.formats.base import ActionContext, ActionOutcome
from compactor.formats.iceberg.read import iceberg_state
from compactor.formats.iceberg.recovery import recover, relative
from compactor.formats.iceberg.references import delete_unreferenced
from compactor.formats.iceberg.replace import CommitOutcomeUnknown, replace, stale_actions
from compactor.formats.iceberg.rewrite import OutputNames, RewrittenBin, rewrite_bin
from compactor.models.results import ActionDetails
from compactor.planning.actions import CompactAction
from compactor.runtime.faults import crash_point
from compactor.runtime.journal import ActionJournal

if TYPE_CHECKING:
    from pyiceberg.table import Table

    from compactor.models.state import TableState

log = logging.getLogger(__name__)


#: bins rewritten at once when the engine names no number (pyarrow reads, decodes and writes off the GIL;
#: pyiceberg's per-file Python work is what one thread waits on)
MAX_WORKERS = 4


def _workers(ctx: ActionContext, jobs: int) -> int:
    threads = getattr(ctx.engine(), "threads", None) or MAX_WORKERS
    return max(1, min(jobs, threads, MAX_WORKERS))


def run_compact_local(actions: Sequence[CompactAction], ctx: ActionContext, planned: TableState,
                      table: Table) -> list[ActionOutcome | CompactorError]:
    """Rewrite and commit ``actions`` (planned at the snapshot ``planned`` was read at) as one snapshot; their
    outcomes in order (the error of an action left out: stale, or refused by the local engine). Raises when
    nothing was committed."""
    st = iceberg_state(planned)
    location = ctx.location
    root, options = location.uri, location.storage_options
    names = OutputNames()
    key = ctx.commit_metadata.get("compactor.action") or f"iceberg-{uuid.uuid4().hex}"
    entry = ActionJournal(root, ctx.commit_metadata.get("compactor.run_id", ""), key, st.snapshot_id,
                          storage_options=options)
    failed: dict[int, CompactorError] = dict(stale_actions(table, st, [a.input_paths for a in actions]))
    if len(failed) == len(actions):
        raise next(iter(failed.values()))
    sizes = {f.path: f.size for f in st.files}
    written: dict[int, list[RewrittenBin]] = {}
    committed = False
    try:
        with entry:
            crash_point("iceberg.journal_written")
            removed = [p for i, a in enumerate(actions) if i not in failed for p in a.input_paths]
            jobs = [(i, b) for i, a in enumerate(actions) if i not in failed for b in a.bins]

            announced: dict[int, list[str]] = {}  # per action, the outputs its bins named (written or not)

            def rewrite(job: tuple[int, tuple[str, ...]]) -> RewrittenBin | CompactorError:
                i, paths = job
                own = set(actions[i].input_paths)

                def named(path: str) -> None:
                    entry.add_outputs([relative(root, path, options)])
                    announced.setdefault(i, []).append(path)

                try:
                    done = rewrite_bin(table, st, paths, names, removed_with=[p for p in removed if p not in own],
                                       on_output=named)
                except CompactorError as e:  # refused (LocalEngineRefusal) or not verified: its action only
                    return e
                if ctx.on_bin_done is not None:
                    ctx.on_bin_done(sum(sizes[p] for p in paths))
                return done

            with ThreadPoolExecutor(max_workers=_workers(ctx, len(jobs)), thread_name_prefix="iceberg-bins") as pool:
                for (i, _), done in zip(jobs, pool.map(rewrite, jobs)):
                    if isinstance(done, CompactorError):
                        failed.setdefault(i, done)
                    else:
                        written.setdefault(i, []).append(done)
            if len(failed) == len(actions):
                raise next(iter(failed.values()))
            crash_point("iceberg.outputs_written")
            table.refresh()  # and again right before the commit: the rewrite took time
            failed.update(stale_actions(table, st, [a.input_paths for a in actions], skip=failed))
            if len(failed) == len(actions):
                raise next(iter(failed.values()))
            if ctx.fence is not None:
                ctx.fence()
            result = replace(table, st, [b for i, bins in written.items() if i not in failed for b in bins],
                             ctx.commit_metadata)
            committed = True
            crash_point("iceberg.after_commit")
            left = [p for i in failed for p in announced.get(i, ())]
            try:  # the outputs of the actions left out (a refused bin's partial one too): no snapshot names them
                delete_unreferenced(table, left, options)
            except Exception as e:  # noqa: BLE001 - committed: a leftover is an orphan, not a failure
                log.warning("%s: could not delete the outputs of the actions left out (%s): %s",
                            location.identifier, ", ".join(left[:3]), e)
    except CommitOutcomeUnknown:
        raise  # the outputs stay: the commit may have landed (the next run's recovery judges them)
    except BaseException:
        if not committed:
            try:  # this run's entry says it ended: its outputs no snapshot references go
                recover(location, 0.0)
            except Exception as e:  # noqa: BLE001 - the next run's recovery tries again; the refusal stands
                log.warning("%s: could not delete the outputs of a refused rewrite yet: %s", location.identifier, e)
        raise
    outcomes: list[ActionOutcome | CompactorError] = []
    for i, _ in enumerate(actions):
        if i in failed:
            outcomes.append(failed[i])
            continue
        mine = written[i]
        gone = [p for b in mine for p in b.inputs]
        added = [b.output for b in mine if b.output is not None]
        outcomes.append(ActionOutcome(
            files_removed=len(gone), files_added=len(added), bytes_removed=sum(sizes[p] for p in gone),
            bytes_added=sum(int(f.file_size_in_bytes) for f in added),
            rows_removed=sum(b.rows_in - b.rows_deleted for b in mine), rows_added=sum(b.rows_out for b in mine),
            version_before=st.snapshot_id, version_after=result.snapshot_id, removed_paths=tuple(gone),
            added_paths=tuple(str(f.file_path) for f in added), details=ActionDetails(method="rewrite", bins=len(mine))))
    return outcomes
