"""What a Delta table's state carries beside its files (TableState.extra of format "delta"): deletion
vectors, files delta-rs cannot remove, and the rows live twice with the repair to plan first."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from compactor.models.duplicates import DuplicateReport
from compactor.models.state import TableState

if TYPE_CHECKING:  # pragma: no cover
    from compactor.formats.delta.repair_plan import RepairProposal


@dataclass(frozen=True)
class DuplicateFacts:
    """Rows live twice, as `compactor plan` found them (formats/delta/repair.py, detect)."""

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
class DeltaFacts:
    """A Delta state's ``extra``: deletion vectors, files delta-rs cannot remove, and rows live twice."""

    #: None: delta-rs cannot read the deletion vectors, so any file may have one
    has_deletion_vectors: bool | None = False
    deletion_vectors_enabled: bool = False
    #: logical path -> rows its deletion vector deletes (files without one are absent; None: unknown)
    deleted_rows: Mapping[str, int] | None = field(default_factory=dict)
    #: files a delta-rs commit cannot remove (their log path is not in delta-rs' encoding)
    unremovable_paths: frozenset[str] = frozenset()
    duplicates: DuplicateFacts = field(default_factory=DuplicateFacts)

    @property
    def with_deletion_vector(self) -> frozenset[str]:
        return frozenset(self.deleted_rows or ())


def delta_facts(state: TableState) -> DeltaFacts:
    """The Delta facts of ``state`` (none known: a state built by hand, as planner tests do)."""
    return state.extra if isinstance(state.extra, DeltaFacts) else DeltaFacts()
