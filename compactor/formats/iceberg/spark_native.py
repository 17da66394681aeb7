"""``compaction.method: optimize`` on an Iceberg table with the spark engine: Iceberg's own
``RewriteDataFiles`` (``SparkActions.get(spark).rewriteDataFiles(table)``, the action behind the
``rewrite_data_files`` procedure) in the run's Spark session, scoped to exactly the planned partitions of
each planned spec (native_scope.py: transform terms, so hidden partitions are selected as the manifests store
them), with options from the policy: ``target-file-size-bytes``, ``min-file-size-bytes`` (the policy's
``min_file_size``: the files compactor would call small), ``max-file-size-bytes`` out of reach (compactor
never plans to split a file), ``min-input-files`` the fewest files a planned action has (so every planned
partition is rewritten), the delete thresholds the files the plan took for their deletes reach
(``delete_thresholds``), partial progress off (one commit) and ``use-starting-sequence-number`` (an
equality delete committed meanwhile still applies to the rows).

Iceberg plans its file groups from the table as it finds it: files appended to a planned partition after
planning are rewritten too, as Delta's native OPTIMIZE does; the outcome's note says how many. Around it:

- before: the exact-bin path's stale check (replace.py ``stale_by_group``: the planned snapshot still in
  the table's history, each action's files still live with the same deletes): a stale action is left out of
  the filter and commits nothing; then the files the filter selects at the table's head (the scan Iceberg's
  planner makes) must all lie in planned partitions, else nothing runs (a spec the filter's terms do not
  narrow); then the lease fence;
- after: the new snapshot, found by compactor's commit properties and read back with pyiceberg, must be a
  ``replace`` whose removed data files all lie in planned partitions, and whose rows out (its added files'
  record counts, and the summary's ``added-records``) equal the rows of the removed files after their
  deletes at the parent snapshot (Iceberg's reader counts those of files with deletes; the others' record
  counts, as the summary's ``deleted-records`` states them): else a VerificationError naming the snapshot.

Iceberg writes into the table's own data folder (the action takes no output folder): a run killed mid-rewrite
leaves files no snapshot references, which ``remove_orphan_files`` deletes (docs/safety.md)."""

from __future__ import annotations

import logging
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from compactor.errors import ApplyError, StalePlanError, UnsupportedTableError, VerificationError
from compactor.formats.base import ActionContext, ActionOutcome
from compactor.formats.iceberg.actions import NATIVE_SEMANTICS
from compactor.formats.iceberg.native_scope import ScopeProblem, planned_scopes
from compactor.formats.iceberg.read import iceberg_state
from compactor.formats.iceberg.replace import CommitOutcomeUnknown, StaleReplaceError, stale_by_group
from compactor.formats.iceberg.spark import java_commit_failure, java_table, use_session_loader
from compactor.formats.iceberg.spark_filter import IcebergFilter
from compactor.formats.iceberg.spark_rewrite import SparkRewrite, check_runtime
from compactor.models.results import ActionDetails
from compactor.models.state import TableState
from compactor.planning.actions import CompactAction

if TYPE_CHECKING:
    from pyiceberg.manifest import DataFile
    from pyiceberg.table import Table
    from pyiceberg.table.snapshots import Snapshot

    from compactor.formats.iceberg.state import IcebergState

log = logging.getLogger(__name__)

#: the method an outcome names (run_results.json ``details.method``)
METHOD = "native rewrite_data_files"
#: ``max-file-size-bytes``: no file is rewritten for being large (compactor plans no split)
NO_SPLIT = 1 << 62

PartitionKey = tuple[int, tuple[object, ...]]


def rewrite_options(actions: Sequence[CompactAction]) -> dict[str, str]:
    """RewriteDataFiles' options for ``actions`` (one commit group: the same sizes)."""
    first = actions[0]
    target = first.target_file_size
    return {"target-file-size-bytes": str(target),
            "min-file-size-bytes": str(min(first.min_file_size, target - 1)),
            "max-file-size-bytes": str(max(NO_SPLIT, target + 1)),
            "min-input-files": str(max(2, min(a.input_files for a in actions))),
            "partial-progress.enabled": "false", "use-starting-sequence-number": "true"}


def delete_thresholds(actions: Sequence[CompactAction], st: IcebergState) -> dict[str, str]:
    """``delete-ratio-threshold`` and ``delete-file-threshold`` so that Iceberg's planner takes the planned
    files the plan took for their deletes (its delete triggers, plan.delete_candidates: a file not small, or
    alone in its action): the ratio the least deleted of them reaches (file-scoped deletes, as Iceberg counts
    them), or 1.0 when none was (only files whose rows are all deleted then); the fewest delete files of those
    whose deletes are not file-scoped."""
    by_path = {f.path: f for f in st.files}
    forced = [by_path[p] for a in actions for p in a.input_paths
              if p in by_path and (by_path[p].size >= a.min_file_size or a.input_files == 1)]
    ratios = [f.deleted_rows_known / f.record_count for f in forced if f.record_count and f.deleted_rows_known]
    out = {"delete-ratio-threshold": repr(min(ratios)) if ratios else "1.0"}
    counted = [len(f.deletes) for f in forced if f.deletes and not f.deleted_rows_known]
    if counted:
        out["delete-file-threshold"] = str(min(counted))
    return out


@dataclass
class _Committed:
    """The replace snapshot the native rewrite committed, as pyiceberg reads it back."""

    snapshot_id: int
    parent_id: int
    operation: str
    summary: Mapping[str, str]
    removed: list[DataFile] = field(default_factory=list)
    added: list[DataFile] = field(default_factory=list)


def run_native(actions: Sequence[CompactAction], ctx: ActionContext, planned: TableState,
               table: Table) -> list[ActionOutcome | StaleReplaceError]:
    """Rewrite the planned partitions of ``actions`` with Iceberg's RewriteDataFiles (module docstring); per
    action its outcome or why it was stale. Raises when nothing was committed, VerificationError when the
    committed snapshot is not what the plan allowed."""
    st = iceberg_state(planned)
    spark = getattr(ctx.engine(), "spark", None)
    if spark is None:
        raise ApplyError(f"{st.identifier}: the spark engine has no Spark session for Iceberg's rewrite_data_files")
    check_runtime(spark)
    table.refresh()
    problems = stale_by_group(table, st, [a.input_paths for a in actions])
    stale = {i: StaleReplaceError(f"{st.identifier}: not committed, the plan is stale: {'; '.join(p)}",
                                  hint="plan again") for i, p in enumerate(problems) if p}
    if len(stale) == len(actions):
        raise next(iter(stale.values()))
    fresh = [a for i, a in enumerate(actions) if i not in stale]
    try:
        scopes = planned_scopes(st, [a.input_paths for a in fresh])
    except ScopeProblem as e:
        raise UnsupportedTableError(f"{st.identifier}: Iceberg's rewrite_data_files cannot be scoped to the planned "
                                    f"partitions: {e}; nothing was committed",
                                    hint="use compaction.method rewrite (compactor's exact-bin rewrite)") from None
    keys = {st.file(p).partition_key for a in fresh for p in a.input_paths}
    with java_table(spark, ctx.location) as jtable:
        use_session_loader(spark)
        expression = IcebergFilter(spark._jvm).of(scopes)
        options = {**rewrite_options(fresh), **delete_thresholds(fresh, st)}
        _refuse_beyond_plan(spark, jtable, expression, st, table, keys, int(options["min-file-size-bytes"]))
        if ctx.fence is not None:
            ctx.fence()
        result = _execute(spark, jtable, expression, options, ctx.commit_metadata, st.identifier)
        if int(result.rewrittenDataFilesCount()) == 0:
            return [stale.get(i) or ActionOutcome(version_before=st.snapshot_id, version_after=st.snapshot_id,
                                                  details=ActionDetails(method=METHOD, note="Iceberg's "
                                                                        "rewrite_data_files found nothing to rewrite"))
                    for i in range(len(actions))]
        committed = _read_back(table, ctx.commit_metadata, st.identifier)
        rows_in = _verify(spark, jtable, table, st, committed, keys)
    return _outcomes(actions, stale, st, table, committed, rows_in)


def _refuse_beyond_plan(spark: Any, jtable: Any, expression: Any, st: IcebergState, table: Table,
                        keys: set[PartitionKey], small_below: int) -> None:
    """Raise (nothing runs) when the filter selects, at the table's head, a file of a partition that was not
    planned which Iceberg's planner could take: one below ``small_below`` bytes or with delete files (its
    delete-ratio rule). The scan is the one Iceberg's planner makes, with the session's case sensitivity."""
    from compactor.formats.iceberg.spark_rewrite import JavaLists
    from compactor.formats.iceberg.state import state_of

    jtable.refresh()
    head = jtable.currentSnapshot()
    if head is None:
        raise StalePlanError(f"{st.identifier}: the table has no snapshot; nothing was committed", hint="plan again")
    sensitive = str(spark.conf.get("spark.sql.caseSensitive", "false")).lower() == "true"
    scan = jtable.newScan().useSnapshot(head.snapshotId()).filter(expression).caseSensitive(sensitive)
    paths = [str(t.file().location()) for t in JavaLists(spark._jvm)(scan.ignoreResiduals().planFiles())]
    known = {f.path: f for f in st.files}
    if any(p not in known for p in paths):
        table.refresh()
        known.update({f.path: f for f in state_of(table, st.identifier).files})
    beyond = [p for p in paths if p not in known or (known[p].partition_key not in keys and (
        known[p].size < small_below or known[p].deletes))]
    if beyond:
        where = known[beyond[0]] if beyond[0] in known else None
        label = f"spec {where.spec_id}: {where.partition_path or '(unpartitioned)'}" if where else beyond[0]
        raise UnsupportedTableError(
            f"{st.identifier}: Iceberg's rewrite_data_files, filtered to the planned partitions, would also consider "
            f"{len(beyond)} file(s) of partitions that were not planned (e.g. {label}): its filter cannot tell them "
            "apart; nothing was committed", hint="use compaction.method rewrite (compactor's exact-bin rewrite)")


def _execute(spark: Any, jtable: Any, expression: Any, options: Mapping[str, str],
             properties: Mapping[str, str], where: str) -> Any:
    """Run RewriteDataFiles; its Result. Raises StalePlanError when Iceberg's validation refused the commit,
    CommitOutcomeUnknown when the catalog did not answer, ApplyError on any other failure (nothing committed)."""
    actions = spark._jvm.org.apache.iceberg.spark.actions.SparkActions.get(spark._jsparkSession)
    action = actions.rewriteDataFiles(jtable).filter(expression)
    for k, v in options.items():
        action = action.option(k, v)
    for k, v in properties.items():
        action = action.snapshotProperty(k, v)
    try:
        return action.execute()
    except Exception as e:  # noqa: BLE001 - py4j wraps the JVM's exception; its text names the cause's class
        failure = java_commit_failure(e)
        if failure.unknown:
            raise CommitOutcomeUnknown(f"{where}: the catalog did not say whether rewrite_data_files' commit landed: "
                                       f"{failure.first}") from None
        if failure.stale:
            raise StalePlanError(f"{where}: not committed, the table changed while rewrite_data_files ran: "
                                 f"{failure.first}", hint="plan again") from None
        raise ApplyError(f"{where}: rewrite_data_files failed: {failure.first}; nothing was committed") from None


def _own_snapshot(table: Table, properties: Mapping[str, str]) -> Snapshot | None:
    """The newest snapshot of the current history whose summary holds ``properties``."""
    from pyiceberg.table.snapshots import ancestors_of

    head = table.metadata.current_snapshot()
    if not properties:  # nothing to tell compactor's snapshot from another writer's
        return None
    for snap in ancestors_of(head, table.metadata) if head is not None else ():
        summary = snap.summary.additional_properties if snap.summary is not None else {}
        if all(summary.get(k) == v for k, v in properties.items()):
            return snap
    return None


def _read_back(table: Table, properties: Mapping[str, str], where: str) -> _Committed:
    """The committed snapshot and the data files it removed and added, from its own manifests."""
    from pyiceberg.manifest import DataFileContent, ManifestContent, ManifestEntryStatus

    table.refresh()
    snap = _own_snapshot(table, properties)
    if snap is None or snap.parent_snapshot_id is None:
        raise VerificationError(f"{where}: rewrite_data_files committed, but its snapshot is not in the table's "
                                "current history")
    summary = snap.summary
    out = _Committed(snap.snapshot_id, snap.parent_snapshot_id,
                     summary.operation.value if summary is not None else "?",
                     dict(summary.additional_properties) if summary is not None else {})
    for m in snap.manifests(table.io):
        if m.added_snapshot_id != snap.snapshot_id or m.content != ManifestContent.DATA:
            continue
        for entry in m.fetch_manifest_entry(table.io, discard_deleted=False):
            if entry.snapshot_id != snap.snapshot_id or entry.data_file.content != DataFileContent.DATA:
                continue
            if entry.status == ManifestEntryStatus.DELETED:
                out.removed.append(entry.data_file)
            elif entry.status == ManifestEntryStatus.ADDED:
                out.added.append(entry.data_file)
    return out


def _key(table: Table, f: DataFile) -> PartitionKey:
    spec_id = int(f.spec_id or 0)
    fields = table.metadata.specs()[spec_id].fields
    return spec_id, tuple(f.partition[i] for i in range(len(fields)))


def _verify(spark: Any, jtable: Any, table: Table, st: IcebergState, c: _Committed,
            keys: set[PartitionKey]) -> dict[str, int]:
    """Check the committed snapshot (module docstring); the rows of each removed file after its deletes."""
    from compactor.formats.iceberg.state import state_of

    where = f"{st.identifier}: rewrite_data_files committed snapshot {c.snapshot_id}, but"
    if c.operation != "replace":
        raise VerificationError(f"{where} it is a {c.operation} snapshot, not a replace")
    outside = [str(f.file_path) for f in c.removed if _key(table, f) not in keys]
    if outside:
        raise VerificationError(f"{where} it removed {len(outside)} file(s) outside the planned partitions, e.g. "
                                f"{outside[0]}")
    parent = st if c.parent_id == st.snapshot_id else state_of(table, st.identifier, c.parent_id)
    removed = [str(f.file_path) for f in c.removed]
    rows = SparkRewrite(spark, jtable, parent, f"{table.location().rstrip('/')}/data").rows_after_deletes(removed)
    rows_in, rows_out = sum(rows.values()), sum(int(f.record_count) for f in c.added)
    stated_in, stated_out = int(c.summary.get("deleted-records", -1)), int(c.summary.get("added-records", -1))
    if stated_in != sum(int(f.record_count) for f in c.removed) or stated_out != rows_out:
        raise VerificationError(f"{where} its summary's records ({stated_in} deleted, {stated_out} added) are not "
                                "those of its manifests")
    if rows_in != rows_out:
        raise VerificationError(f"{where} it removed {rows_in} live rows and added {rows_out}")
    return rows


def _outcomes(actions: Sequence[CompactAction], stale: Mapping[int, StaleReplaceError], st: IcebergState,
              table: Table, c: _Committed, rows_in: Mapping[str, int]) -> list[ActionOutcome | StaleReplaceError]:
    """Per action: the committed files of its partition (added files of a partition no action names, written
    into the current spec from an older one, go to the first action of another spec), or why it was stale."""
    owner: dict[PartitionKey, int] = {}
    for i, a in enumerate(actions):
        if i not in stale:
            owner.setdefault(st.file(a.input_paths[0]).partition_key, i)
    removed: dict[int, list[DataFile]] = {}
    added: dict[int, list[DataFile]] = {}
    for f in c.removed:
        removed.setdefault(owner[_key(table, f)], []).append(f)
    moved = next((i for k, i in owner.items() if k[0] != table.metadata.default_spec_id), min(owner.values()))
    for f in c.added:
        added.setdefault(owner.get(_key(table, f), moved), []).append(f)
    planned = {p for i, a in enumerate(actions) if i not in stale for p in a.input_paths}
    gone = {str(f.file_path) for f in c.removed}
    appended = len(gone - planned)
    left = len(planned - gone)
    notes = [NATIVE_SEMANTICS + f" ({appended} such file(s) in this commit)"]
    if left:
        notes.append(f"{left} planned file(s) were not picked by Iceberg's planner and stay: the next plan takes them")
    out: list[ActionOutcome | StaleReplaceError] = []
    for i in range(len(actions)):
        if i in stale:
            out.append(stale[i])
            continue
        rem, add = removed.get(i, []), added.get(i, [])
        out.append(ActionOutcome(
            files_removed=len(rem), files_added=len(add), bytes_removed=sum(int(f.file_size_in_bytes) for f in rem),
            bytes_added=sum(int(f.file_size_in_bytes) for f in add),
            rows_removed=sum(rows_in[str(f.file_path)] for f in rem), rows_added=sum(int(f.record_count) for f in add),
            version_before=st.snapshot_id, version_after=c.snapshot_id,
            removed_paths=tuple(str(f.file_path) for f in rem), added_paths=tuple(str(f.file_path) for f in add),
            details=ActionDetails(method=METHOD, note="; ".join(notes))))
    return out
