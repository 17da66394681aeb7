"""What a Delta table's state carries beside its files (TableState.extra of format "delta"): its protocol
and schema, deletion vectors, files delta-rs cannot remove, the files a VACUUM would delete now, and the
rows live twice with the repair to plan first."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from compactor.models.duplicates import DuplicateReport
from compactor.models.state import TableState

if TYPE_CHECKING:  # pragma: no cover
    from compactor.formats.delta.duplicates.repair_plan import RepairProposal
    from compactor.formats.delta.read.deletion_vector_ids import DeletionVectorRef


@dataclass(frozen=True)
class DuplicateFacts:
    """Rows live twice, as `compactor plan` found them (formats/delta/duplicates/repair.py, detect)."""

    #: one report per anomaly (the plan's ``duplicate_rewrite``)
    reports: tuple[DuplicateReport, ...] = ()
    #: the live files holding the extra copies (never planned as compaction inputs)
    carriers: frozenset[str] = frozenset()
    #: the repair of them all, when it may be committed
    proposal: RepairProposal | None = None
    window_start: int | None = None
    #: rows of the files the repair removes and restores
    rows: tuple[int, int] | None = None
    #: why the log could not be scanned (the plan goes on without it)
    scan_error: str | None = None


@dataclass(frozen=True)
class DeltaProtocol:
    """A Delta table's protocol: the reader and writer versions and the table features it requires."""

    min_reader_version: int = 1
    min_writer_version: int = 2
    reader_features: tuple[str, ...] = ()
    writer_features: tuple[str, ...] = ()


@dataclass(frozen=True)
class DeltaFacts:
    """A Delta state's ``extra``: protocol, schema, deletion vectors, files delta-rs cannot remove, the
    VACUUM's candidates and rows live twice."""

    protocol: DeltaProtocol = field(default_factory=DeltaProtocol)
    #: the table's schema as JSON (metaData.schemaString), for engines that must write the same schema
    schema_json: str | None = None
    #: None: delta-rs cannot read the deletion vectors, so any file may have one
    has_deletion_vectors: bool | None = False
    deletion_vectors_enabled: bool = False
    #: logical path -> rows its deletion vector deletes (files without one are absent; None: unknown)
    deleted_rows: Mapping[str, int] | None = field(default_factory=dict)
    #: logical path -> its deletion vector's id and cardinality as the log describes it (read/deletion_vector_ids.py);
    #: None when only delta-rs could tell (its counts are in ``deleted_rows``, its ids unknown)
    deletion_vectors: Mapping[str, DeletionVectorRef] | None = None
    #: files a delta-rs commit cannot remove (their log path is not in delta-rs' encoding); compactor's own
    #: commit spells their removes as the log spelled their adds (formats/delta/read/log_replay.py, spellings)
    unremovable_paths: frozenset[str] = frozenset()
    #: whether compactor writes this table's commits itself (plan/support.py, compactor_commits); False: delta-rs
    #: does, which cannot remove ``unremovable_paths`` nor files with deletion vectors
    compactor_commits: bool = True
    #: the files a VACUUM at the policy's retention would delete now (relative to the table root as stored,
    #: sorted), None when they could not be listed (read only when the policy enables vacuum)
    vacuum_candidates: tuple[str, ...] | None = None
    #: files without a deletion vector in partitions holding one, whose footer holds columns the table lacks
    #: (read/extra_columns.py), with those columns: REORG ... APPLY (PURGE) rewrites them too (read only when
    #: the policy enables compaction.purge; None: not read)
    extra_columns: Mapping[str, tuple[str, ...]] | None = None
    duplicates: DuplicateFacts = field(default_factory=DuplicateFacts)

    @property
    def with_deletion_vector(self) -> frozenset[str]:
        return frozenset(self.deleted_rows or ())


def delta_facts(state: TableState) -> DeltaFacts:
    """The Delta facts of ``state`` (none known: a state built by hand, as planner tests do)."""
    return state.extra if isinstance(state.extra, DeltaFacts) else DeltaFacts()
