"""What an Iceberg table's retention is planned from (PURE data): retention_read.py reads it, retention_plan.py
plans from it, state.IcebergState carries it."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field


@dataclass(frozen=True)
class SnapshotFact:
    """One snapshot in the table's metadata."""

    snapshot_id: int
    parent_id: int | None
    timestamp_ms: int
    #: the manifests its manifest list names
    manifests: tuple[str, ...] = ()


@dataclass(frozen=True, order=True)
class RefFact:
    """A branch or tag: its name, the snapshot it points to, ``branch`` or ``tag``."""

    name: str
    snapshot_id: int
    kind: str


@dataclass(frozen=True, order=True)
class ListedFile:
    """A file under the table's location (its path as Storage names it: absolute), size and mtime."""

    path: str
    size: int
    mtime_ms: int


@dataclass(frozen=True)
class RetentionFacts:
    """What an Iceberg table's retention is planned from (retention_read.py)."""

    #: None: the table has no snapshot
    current_id: int | None
    snapshots: tuple[SnapshotFact, ...]
    refs: tuple[RefFact, ...]
    #: per manifest: (path, size) of each data or delete file its entries name, whatever their status
    manifests: Mapping[str, tuple[tuple[str, int], ...]] = field(repr=False)
    #: files under the location no snapshot references (None: not listed; ``listing_problem`` says why
    #: when one was asked for)
    unreferenced: tuple[ListedFile, ...] | None = None
    listing_problem: str | None = None
    #: why the facts could not be read (nothing is planned)
    problem: str | None = None
    format_version: int = 2
