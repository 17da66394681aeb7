"""Delta's purge of soft-deleted rows (PURE): the ``purge`` actions (purge_action.py) a policy's
``compaction.purge`` plans per partition, from the table's deletion vectors.

A partition is purged when the rows its files' deletion vectors delete are more than ``min_deleted_rows`` or
more than ``min_deleted_ratio`` of its rows, whatever the files' sizes. The action lists exactly the files
with a deletion vector in the partition (what delta-spark's ``REORG TABLE ... WHERE <partition> APPLY (PURGE)``
rewrites: DeltaPurgeOperation.filterFilesToReorg), and its files holding a column the table lacks (REORG
rewrites those too: read/extra_columns.py; where the engine's rewrite cannot leave such a column out, the
partition is skipped), packed as REORG packs them (ascending size, greedily up to
``target_file_size``, which apply sets as ``spark.databricks.delta.optimize.maxFileSize``; a bin of one file
is kept: OptimizeTableCommand.groupFilesIntoBins keeps single-file bins for a reorg), each with its
deletion vector's id and cardinality as the log describes it. Its precondition is the table version and the
digest of those files; apply also compares each file's deletion vector with the planned one (a DELETE since
planning leaves the path live but changes its vector: formats/delta/apply/purge.py)."""

from __future__ import annotations

import datetime as dt
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING

import pyarrow as pa

from compactor.formats.delta.plan.purge_action import PurgeAction, PurgeSkipReason
from compactor.planning.actions import Precondition
from compactor.planning.bins import pack_sorted
from compactor.planning.partitions import partition_key_column
from compactor.planning.skips import Skip
from compactor.policy.model import Purge, TablePolicy
from compactor.policy.predicate import Predicate
from compactor.units import format_size

if TYPE_CHECKING:  # pragma: no cover
    from compactor.formats.delta.read.deletion_vector_ids import DeletionVectorRef


@dataclass(frozen=True)
class PartitionDeletes:
    """One partition's soft-deleted rows: its files with a deletion vector (ascending size, log order among
    equal sizes), and the totals a purge decision reads."""

    partition: Mapping[str, str | None]
    paths: tuple[str, ...]
    sizes: tuple[int, ...]
    cardinalities: tuple[int, ...]
    #: rows and bytes of all the partition's files (rows None when a file has no count)
    rows: int | None
    bytes: int
    #: size x deleted / rows, summed over its files with a deletion vector (a file without a row count: all of it)
    dead_bytes: int
    #: its files without a deletion vector that hold columns the table lacks (REORG rewrites them too), with
    #: their sizes and those columns
    extra_paths: tuple[str, ...] = ()
    extra_sizes: tuple[int, ...] = ()
    extra_columns: tuple[tuple[str, ...], ...] = ()

    @property
    def deleted_rows(self) -> int:
        return sum(self.cardinalities)

    @property
    def deleted_ratio(self) -> float | None:
        return None if not self.rows else self.deleted_rows / self.rows

    def over(self, purge: Purge) -> bool:
        """Whether ``purge``'s thresholds want it purged (strictly more than either; a partition whose row
        count is unknown is purged, as delta-spark's OPTIMIZE always rewrites a DV file without one)."""
        if not self.deleted_rows:
            return False
        if purge.min_deleted_rows is not None and self.deleted_rows > purge.min_deleted_rows:
            return True
        ratio = self.deleted_ratio
        return ratio is None or ratio > purge.min_deleted_ratio

    def details(self) -> dict[str, int | float | None]:
        ratio = self.deleted_ratio
        return {"files_with_deletes": len(self.paths), "deleted_rows": self.deleted_rows, "rows": self.rows,
                "deleted_ratio": None if ratio is None else round(ratio, 4), "dead_bytes": self.dead_bytes,
                "dead_bytes_ratio": round(self.dead_bytes / self.bytes, 4) if self.bytes else 0.0}


def partition_deletes(files: pa.Table, partition_columns: Sequence[str], deleted: Mapping[str, int],
                      extra: Mapping[str, tuple[str, ...]] | None = None) -> list[PartitionDeletes]:
    """Every partition holding a file with a deletion vector (``deleted``: path -> rows it deletes), in
    partition key order; ``extra``: files holding columns the table lacks, with those columns."""
    extra = extra or {}
    keys = partition_key_column(files, partition_columns).to_pylist()
    paths = files.column("path").to_pylist()
    sizes = files.column("size_bytes").to_pylist()
    records = files.column("num_records").to_pylist()
    parts = [files.column(f"partition.{c}").to_pylist() for c in partition_columns]
    by_key: dict[str, list[int]] = {}
    for i, k in enumerate(keys):
        by_key.setdefault(k, []).append(i)
    out = []
    for k in sorted(by_key):
        idx = by_key[k]
        dv = sorted((i for i in idx if deleted.get(paths[i])), key=lambda i: sizes[i])
        if not dv:
            continue
        counts = [records[i] for i in idx]
        dead = sum(sizes[i] if not records[i] else sizes[i] * deleted[paths[i]] // records[i] for i in dv)
        more = sorted((i for i in idx if not deleted.get(paths[i]) and paths[i] in extra), key=lambda i: sizes[i])
        out.append(PartitionDeletes(
            partition={c: col[idx[0]] for c, col in zip(partition_columns, parts)},
            paths=tuple(paths[i] for i in dv), sizes=tuple(sizes[i] for i in dv),
            cardinalities=tuple(deleted[paths[i]] for i in dv),
            rows=None if None in counts else sum(counts), bytes=sum(sizes[i] for i in idx), dead_bytes=dead,
            extra_paths=tuple(paths[i] for i in more), extra_sizes=tuple(sizes[i] for i in more),
            extra_columns=tuple(extra[paths[i]] for i in more)))
    return out


def plan_purge(policy: TablePolicy, files: pa.Table, partition_columns: Sequence[str], version: int | None, *,
               deleted: Mapping[str, int] | None, vectors: Mapping[str, DeletionVectorRef] | None,
               where: Predicate | None, engine_can_purge: bool, today: dt.date,
               extra_columns: Mapping[str, tuple[str, ...]] | None = None,
               droppable: frozenset[str] | None = None) -> tuple[list[PurgeAction], list[Skip]]:
    """One ``purge`` per partition over the policy's thresholds (module docstring), and a skip naming the
    deleted rows of every other partition holding some. ``extra_columns``: files holding columns the table
    lacks (read/extra_columns.py); ``droppable``: the only such columns the engine's rewrite leaves out
    (None: any, delta-spark's REORG)."""
    purge = policy.compaction.purge
    if not purge.enabled or not deleted:
        return [], []
    actions: list[PurgeAction] = []
    skips: list[Skip] = []
    target = policy.compaction.target_file_size
    for part in partition_deletes(files, partition_columns, deleted, extra_columns):
        values = dict(part.partition)
        if where is not None and not where.evaluate(values, today=today):
            continue  # compaction's own skip names the partition as outside where
        details = part.details()
        said = (f"{part.deleted_rows:,} soft-deleted row(s) in {len(part.paths)} file(s)"
                + (f", {part.deleted_ratio:.1%} of its rows" if part.deleted_ratio is not None else ""))
        if not part.over(purge):
            skips.append(Skip(PurgeSkipReason.BELOW_PURGE_THRESHOLD, values or None, details,
                              f"{said}: within min_deleted_ratio {purge.min_deleted_ratio}"
                              + (f" and min_deleted_rows {purge.min_deleted_rows}" if purge.min_deleted_rows is not None
                                 else "")))
            continue
        if not engine_can_purge:
            skips.append(Skip(PurgeSkipReason.PURGE_NEEDS_SPARK, values or None, details,
                              f"{said}: this engine does not rewrite files with deletion vectors"))
            continue
        if vectors is None or any(p not in vectors for p in part.paths):
            skips.append(Skip(PurgeSkipReason.PURGE_UNKNOWN_VECTORS, values or None, details,
                              f"{said}: the log's deletion vector descriptors could not be read"))
            continue
        kept = [(p, cols) for p, cols in zip(part.extra_paths, part.extra_columns)
                if droppable is not None and not set(cols) <= droppable]
        if kept:
            skips.append(Skip(PurgeSkipReason.PURGE_NEEDS_SPARK, values or None, details,
                              f"{said}: {len(kept)} of its file(s) hold column(s) the table lacks (e.g. {kept[0][0]}: "
                              f"{', '.join(kept[0][1])}, dropped from the table?), which REORG ... APPLY (PURGE) "
                              "rewrites without them and this engine's rewrite does not leave out"))
            continue
        all_paths = part.paths + part.extra_paths
        sizes = dict(zip(all_paths, part.sizes + part.extra_sizes))
        ordered = sorted(all_paths, key=lambda p: sizes[p])  # REORG packs every file it rewrites by size
        runs = pack_sorted([sizes[p] for p in ordered], target, [True] * len(ordered))
        bins = tuple(tuple(ordered[a:b]) for a, b in runs)
        paths = [p for b in bins for p in b]
        card = dict(zip(part.paths, part.cardinalities))
        extra = dict(zip(part.extra_paths, part.extra_columns))
        in_bytes = sum(sizes.values())
        held = _rows(files, paths)
        live_rows = None if held is None else held - part.deleted_rows
        also = (f"; {len(extra)} file(s) holding column(s) the table lacks ({', '.join(sorted({c for cs in extra.values() for c in cs}))}),"
                " which REORG also rewrites" if extra else "")
        actions.append(PurgeAction(
            partition=values, input_files=len(paths), input_bytes=in_bytes, expected_output_files=len(bins),
            expected_output_bytes=max(0, in_bytes - part.dead_bytes), rows=live_rows,
            precondition=Precondition.of(version, paths), bins=bins, target_file_size=target,
            min_deleted_rows=purge.min_deleted_rows, min_deleted_ratio=purge.min_deleted_ratio,
            deletion_vectors=tuple(vectors[p].id if p in card else "" for p in paths),
            cardinalities=tuple(card.get(p, 0) for p in paths),
            extra_columns=tuple(", ".join(extra.get(p, ())) for p in paths) if extra else (),
            deleted_rows=part.deleted_rows, partition_rows=part.rows, reclaimed_bytes=part.dead_bytes,
            reason=f"{said} (~{format_size(part.dead_bytes)} of {format_size(part.bytes)} dead){also}: purge "
                   f"{len(paths)} file(s) into {len(bins)} ({format_size(in_bytes)} read)"))
    return actions, skips


def _rows(files: pa.Table, paths: Sequence[str]) -> int | None:
    """The rows ``paths`` hold (deleted ones included), None when one has no count."""
    wanted = set(paths)
    counts = [n for p, n in zip(files.column("path").to_pylist(), files.column("num_records").to_pylist())
              if p in wanted]
    return None if None in counts else sum(counts)
