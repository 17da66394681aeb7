"""The local engine: delta-rs (no JVM). Compaction per planned partition with partition_filters."""

from __future__ import annotations

import json
import logging
from typing import Any, Mapping

import pyarrow as pa

from compactor.engines import delta_guard
from compactor.engines.base import ActionContext, ActionOutcome
from compactor.errors import ApplyError, UnsupportedTableError
from compactor.planning.build import DELTA_RS_UNWRITABLE, unsupported_reason
from compactor.planning.plan import Action

log = logging.getLogger(__name__)


def partition_filters(partition: Mapping[str, str | None]) -> list[tuple[str, str, Any]] | None:
    """delta-rs partition filters for one partition. A null partition value (stored in the folder
    ``__HIVE_DEFAULT_PARTITION__``) must be written as "": delta-rs rejects None and matches nothing for
    the literal folder name (measured with deltalake 1.6.6)."""
    if not partition:
        return None
    return [(k, "=", "" if v is None else v) for k, v in partition.items()]


def check_writable(ctx: ActionContext) -> None:
    feats = set(ctx.state.protocol.writer_features) & DELTA_RS_UNWRITABLE
    if feats:
        raise UnsupportedTableError(f"{ctx.table.name}: delta-rs cannot write tables with writer feature(s) "
                                    f"{', '.join(sorted(feats))}")


def stats_records(add: Mapping[str, Any]) -> int | None:
    stats = add.get("stats")
    if isinstance(stats, str):
        try:
            stats = json.loads(stats)
        except ValueError:
            return None
    return stats.get("numRecords") if isinstance(stats, Mapping) else None


class LocalEngine:
    name = "local"

    #: _rewrite re-checks every planned input on the very snapshot delta-rs compacts from, so the runner
    #: may check preconditions on an older snapshot of the table (see runner._apply_table)
    rechecks_inputs = True

    def __init__(self, storage_options: Mapping[str, str] | None = None, threads: int | None = None) -> None:
        self.storage_options = dict(storage_options or {})
        self.threads = threads
        self._handles: dict[str, Any] = {}

    def versions(self) -> dict[str, str]:
        import deltalake

        return {"deltalake": deltalake.__version__, "pyarrow": pa.__version__}

    def _table(self, uri: str):
        """One DeltaTable per table for the whole run, brought to the latest version before each use
        (an incremental log read is ~5x cheaper than loading the table again)."""
        from deltalake import DeltaTable

        dt = self._handles.get(uri)
        if dt is None:
            dt = self._handles[uri] = DeltaTable(uri, storage_options=self.storage_options or None)
        else:
            dt.update_incremental()
        return dt

    def run(self, action: Action, ctx: ActionContext) -> ActionOutcome:
        check_writable(ctx)
        if action.type in ("compact", "z_order"):
            return self._rewrite(action, ctx)
        if action.type == "vacuum":
            return self._vacuum(action, ctx)
        if action.type == "set_properties":
            return self._set_properties(action, ctx)
        if action.type == "sort":
            raise UnsupportedTableError("strategy sort needs the spark engine (delta-rs has no sorted rewrite)")
        raise ApplyError(f"the local engine cannot run {action.type} actions")

    def _rewrite(self, action: Action, ctx: ActionContext) -> ActionOutcome:
        from deltalake.transaction import CommitProperties

        reason = unsupported_reason(ctx.state, self.name)
        if reason:
            raise UnsupportedTableError(f"{ctx.table.name}: {reason}")
        uri = ctx.table.path
        dt = self._table(uri)
        read_version = dt.version()
        # re-check on the very snapshot delta-rs will compact from (its commit follows immediately);
        # row counts come from that snapshot too: delta-rs may also pick up files appended since planning
        snap = pa.table(dt.get_add_actions(flatten=True))
        records = dict(zip(snap.column("path").to_pylist(), snap.column("num_records").to_pylist()))
        live = set(records)
        gone = [p for p in action.input_paths if p not in live]
        if gone:
            from compactor.errors import StalePlanError

            raise StalePlanError(f"{len(gone)} planned input file(s) are no longer live (e.g. {gone[0]})")
        marker = ctx.commit_metadata["compactor.action"]
        props = CommitProperties(custom_metadata=dict(ctx.commit_metadata))
        target = int(action.params.get("target_file_size") or 0) or None
        filters = partition_filters(action.partition)
        if action.type == "compact":
            metrics = dt.optimize.compact(partition_filters=filters, target_size=target,
                                          max_concurrent_tasks=self.threads, commit_properties=props)
        else:
            metrics = dt.optimize.z_order(list(action.params.get("z_order_by") or ()), partition_filters=filters,
                                          target_size=target, max_concurrent_tasks=self.threads,
                                          commit_properties=props)
        if not metrics.get("numFilesAdded") and not metrics.get("numFilesRemoved"):
            return ActionOutcome(version_before=read_version, version_after=read_version,
                                 details={"note": "delta-rs found nothing to rewrite"})
        own = delta_guard.find_own_commit(uri, self.storage_options, read_version, marker, latest=dt.version())
        outcome = self._outcome(own, read_version, records)
        overlap = delta_guard.find_overlapping_removes(uri, self.storage_options, read_version, own.version,
                                                       own.removes)
        if overlap:
            repair_v = delta_guard.repair_duplicate_commit(
                uri, self.storage_options, own.adds, own.removes, overlap, own_version=own.version,
                commit_metadata={**ctx.commit_metadata, "compactor.action": marker + ":repair"},
                num_records=records)
            outcome.details["repaired"] = {"overlapping_removes": len(overlap), "repair_version": repair_v,
                                           "conflicting_versions": sorted(set(overlap.values()))}
            outcome.version_after = repair_v
            outcome.files_added = 0
            outcome.files_removed = 0
        return outcome

    @staticmethod
    def _outcome(own: delta_guard.Commit, read_version: int, records: Mapping[str, int | None]) -> ActionOutcome:
        rows_removed = [records.get(p) for p in own.removes]
        rows_added = [stats_records(a) for a in own.adds.values()]
        return ActionOutcome(
            files_removed=len(own.removes), files_added=len(own.adds),
            bytes_removed=sum(int(r.get("size") or 0) for r in own.removes.values()),
            bytes_added=sum(int(a.get("size") or 0) for a in own.adds.values()),
            rows_removed=None if any(r is None for r in rows_removed) else sum(rows_removed),
            rows_added=None if any(r is None for r in rows_added) else sum(rows_added),
            version_before=read_version, version_after=own.version,
            removed_paths=tuple(own.removes), added_paths=tuple(own.adds),
        )

    def _vacuum(self, action: Action, ctx: ActionContext) -> ActionOutcome:
        dt = self._table(ctx.table.path)
        from compactor.planning.retention import DELETED, parse_interval

        hours = int(action.params["retention_hours"])
        declared = parse_interval(dt.metadata().configuration.get(DELETED))
        table_secs = 7 * 86400 if declared is None else declared  # Delta's default; 0 is a valid value
        if hours * 3600 < table_secs:
            # never below what the table declares (delta-rs would refuse too; say why clearly)
            raise ApplyError(f"vacuum retention {hours}h is below the table's {DELETED} ({table_secs // 3600}h)",
                             hint="apply the set_properties action first or raise the policy's retention")
        dry = ctx.dry_run
        files = dt.vacuum(retention_hours=hours, dry_run=dry, enforce_retention_duration=True)
        v = dt.version()
        return ActionOutcome(files_removed=0 if dry else len(files), version_before=ctx.state.version,
                             version_after=v, details={"dry_run": dry, "files": sorted(files)[:1000],
                                                      "file_count": len(files)})

    def _set_properties(self, action: Action, ctx: ActionContext) -> ActionOutcome:
        dt = self._table(ctx.table.path)
        before = dt.version()
        props = {k: str(v) for k, v in action.params["properties"].items()}
        if not ctx.dry_run:
            dt.alter.set_table_properties(props, raise_if_not_exists=False)
        return ActionOutcome(version_before=before, version_after=self._table(ctx.table.path).version(),
                             details={"properties": props, "dry_run": ctx.dry_run})

    def close(self) -> None:
        self._handles.clear()
