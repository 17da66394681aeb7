"""Delta's ``purge`` action and the skips of partitions it leaves alone (PURE, no pyarrow: loading a plan loads
it): what formats/delta/plan/purge.py plans from a policy's ``compaction.purge``, registered with Delta's plan
words (actions.py). The spark engine runs it as delta-spark's ``REORG TABLE ... WHERE <partition> APPLY
(PURGE)``, the local engine through compactor's own rewrite of its bins (formats/delta/apply/purge.py)."""

from __future__ import annotations

from collections.abc import Collection, Mapping
from dataclasses import dataclass, field
from enum import StrEnum
from typing import ClassVar

from compactor.errors import StalePlanError, VerificationError
from compactor.planning.actions import Action, ActionRow, partition_label
from compactor.planning.skips import SkipKind
from compactor.policy.model import TablePolicy
from compactor.units import format_size


@dataclass(frozen=True, kw_only=True)
class PurgeAction(Action):
    """Rewrite the files of one partition that carry a deletion vector, without their soft-deleted rows, and
    those holding columns the table lacks, without those columns (delta-spark's ``REORG TABLE ... WHERE
    <partition> APPLY (PURGE)``). ``rows`` are the rows readers see in them (physical minus deleted): the
    same rows after."""

    type: ClassVar[str] = "purge"
    rewrites: ClassVar[bool] = True
    #: the most bytes of input one output file takes (REORG's maxFileSize)
    target_file_size: int = field(metadata={"schema": {"minimum": 1}, "required": True})
    #: the policy's thresholds it was planned with
    min_deleted_rows: int | None = field(default=None, metadata={"schema": {"minimum": 0}})
    min_deleted_ratio: float = field(metadata={"schema": {"minimum": 0, "maximum": 1}, "required": True})
    #: the id of each input file's deletion vector (the protocol's unique id), in the order of the bins' files;
    #: "" for a file without one (planned for the columns the table lacks: ``extra_columns``)
    deletion_vectors: tuple[str, ...] = field(default=(), metadata={"schema": {
        "items": {"type": "string"}, "minItems": 1}, "required": True})
    #: the rows each of those deletion vectors deletes (its descriptor's cardinality), in the same order
    cardinalities: tuple[int, ...] = field(default=(), metadata={"schema": {
        "items": {"type": "integer", "minimum": 0}, "minItems": 1}, "required": True})
    #: the columns each input holds that the table lacks (comma-separated, "" for none), in the same order;
    #: empty when no input holds any
    extra_columns: tuple[str, ...] = field(default=(), metadata={"schema": {"items": {"type": "string"}}})
    #: the rows the purge drops (the sum of ``cardinalities``)
    deleted_rows: int = field(default=0, metadata={"schema": {"minimum": 0}})
    #: the partition's rows as its files hold them (deleted ones included; None when a file has no count)
    partition_rows: int | None = field(default=None, metadata={"schema": {"minimum": 0}})
    #: the bytes the deleted rows take, estimated per file as size x deleted / rows: what the purge reclaims
    reclaimed_bytes: int = field(default=0, metadata={"schema": {"minimum": 0}})

    def deletion_vector_of(self) -> Mapping[str, str]:
        """Each input file's planned deletion vector id."""
        return dict(zip(self.input_paths, self.deletion_vectors))

    def check_deletion_vectors(self, live: Mapping[str, str] | None) -> None:
        """StalePlanError when a planned file's deletion vector is not the one planned (a DELETE, UPDATE or
        MERGE changed it since) or the live vectors cannot be told. ``live``: path -> id of its deletion vector."""
        if live is None:
            raise StalePlanError("the table's deletion vectors cannot be read from its log to compare with the plan")
        changed = [p for p, dv in self.deletion_vector_of().items() if live.get(p, "") != dv]
        if changed:
            raise StalePlanError(f"{len(changed)} file(s) the purge rewrites have a different deletion vector than "
                                 f"planned (e.g. {changed[0]}): rows were deleted since", hint="re-run `compactor plan`")

    def check_dropped(self, dropped: Mapping[str, int]) -> None:
        """VerificationError unless the rows a rewrite drops from each input (``dropped``: path -> the
        positions its proved deletion vector deletes) are the cardinality planned for it."""
        wrong = [(p, n, dropped.get(p, 0)) for p, n in zip(self.input_paths, self.cardinalities)
                 if dropped.get(p, 0) != n]
        if wrong:
            p, n, got = wrong[0]
            raise VerificationError(f"{len(wrong)} file(s) the purge rewrites would drop other rows than planned (e.g. "
                                    f"{p}: {got} row(s), planned {n}); nothing was written or committed")

    def check(self, live: Collection[str]) -> None:
        self.precondition.check(live, self.input_paths)

    def policy_problems(self, policy: TablePolicy) -> list[str]:
        p = policy.compaction.purge
        if not policy.enabled or not p.enabled:
            return ["the policy does not enable compaction.purge"]
        out = [f"{k} {have!r} is not the policy's {want!r}" for k, have, want in (
            ("min_deleted_rows", self.min_deleted_rows, p.min_deleted_rows),
            ("min_deleted_ratio", self.min_deleted_ratio, p.min_deleted_ratio),
            ("target_file_size", self.target_file_size, policy.compaction.target_file_size)) if have != want]
        n = len(self.input_paths)
        if not (n == len(self.deletion_vectors) == len(self.cardinalities) == self.input_files):
            out.append(f"it lists {n} file(s), {len(self.deletion_vectors)} deletion vector(s) and "
                       f"{len(self.cardinalities)} cardinalities (input_files {self.input_files})")
        if self.extra_columns and len(self.extra_columns) != n:
            out.append(f"it lists {n} file(s) and {len(self.extra_columns)} extra_columns")
        why = self.extra_columns or ("",) * n
        bare = [p for p, dv, cols in zip(self.input_paths, self.deletion_vectors, why) if not dv and not cols]
        if bare:
            out.append(f"{len(bare)} file(s) have neither a deletion vector nor a column the table lacks (e.g. {bare[0]})")
        if sum(self.cardinalities) != self.deleted_rows:
            out.append(f"deleted_rows {self.deleted_rows} is not the sum of its cardinalities")
        return out

    def row(self) -> ActionRow:
        return ActionRow(partition_label(self.partition), f"{self.input_files} -> {self.expected_output_files}",
                         format_size(self.input_bytes),
                         f"{self.deleted_rows:,} deleted row(s) out, ~{format_size(self.reclaimed_bytes)} reclaimed")


class PurgeSkipReason(StrEnum):
    """Why a partition with soft-deleted rows is not purged."""

    #: its soft-deleted rows are within ``min_deleted_rows`` and ``min_deleted_ratio``
    BELOW_PURGE_THRESHOLD = "below_purge_threshold"
    #: the engine cannot purge the partition (its rewrite cannot leave out a column the table lacks that a file
    #: holds, e.g. one dropped under column mapping)
    PURGE_NEEDS_SPARK = "purge_needs_spark"
    #: the log's deletion vector descriptors could not be read (delta-rs counted the rows: no ids to plan with)
    PURGE_UNKNOWN_VECTORS = "purge_unknown_deletion_vectors"


PURGE_SKIPS = (
    SkipKind(PurgeSkipReason.BELOW_PURGE_THRESHOLD, "nothing to do"),
    SkipKind(PurgeSkipReason.PURGE_NEEDS_SPARK, "apply with the spark engine: delta-spark's REORG TABLE ... APPLY "
             "(PURGE) drops soft-deleted rows and columns the table lacks"),
    SkipKind(PurgeSkipReason.PURGE_UNKNOWN_VECTORS, "`compactor inspect` the table: its log's deletion vectors "
             "could not be read"),
)
