"""What `compactor inspect` reports about a path: a table of any format (its files, and what its format
adds: ``TableFormat.inspect``), or what a path that holds no table shows (formats/no_table.py)."""

from __future__ import annotations

from dataclasses import asdict, dataclass, field
from typing import Any, Protocol

from compactor.models.duplicates import DuplicateReport, LogWindow

#: upper bounds of the histogram buckets (bytes); the last bucket is open
BUCKETS = (1 << 20, 8 << 20, 32 << 20, 128 << 20, 512 << 20)
BUCKET_LABELS = ("<1MB", "1-8MB", "8-32MB", "32-128MB", "128-512MB", ">=512MB")
SMALL_FILE_DEFAULT = 32 << 20


class ComparedSettings(Protocol):
    """The settings of the policy that manages an inspected table, as the table's format reads them
    (``TableFormat.inspect_settings``): what inspect compares the table against. ``to_dict`` is the
    report's ``policy``: only the settings the policy has."""

    @property
    def min_file_size(self) -> int | None: ...

    def to_dict(self) -> dict[str, Any]: ...


@dataclass(frozen=True)
class FileSizeSettings:
    """The settings inspect compares every table against: the policy's min_file_size (the default: no
    policy, nothing to compare)."""

    min_file_size: int | None = None

    def to_dict(self) -> dict[str, Any]:
        return {} if self.min_file_size is None else {"min_file_size": self.min_file_size}


class ReportedLog(Protocol):
    """The health of one of a table's logs as its format measures it (an entry of the report's ``logs``)."""

    def to_dict(self) -> dict[str, Any]: ...


@dataclass(frozen=True)
class InspectSection:
    """A part of the inspect text a format adds (the health of one of its logs): a heading and its lines."""

    heading: str
    lines: tuple[str, ...]


@dataclass(frozen=True)
class PartitionHealth:
    """One partition's files: how many, their bytes, how many are small, and a histogram of sizes."""

    partition: str
    files: int
    bytes: int
    small_files: int
    histogram: dict[str, int]
    #: rows its files hold that the format marks deleted without rewriting them (TableState's ``deleted_rows``)
    deleted_rows: int = 0
    #: rows its files hold, deleted ones included (None when a file has no count)
    rows: int | None = None

    @property
    def deleted_share(self) -> float | None:
        return self.deleted_rows / self.rows if self.rows else None


@dataclass(frozen=True)
class InspectReport:
    """What `compactor inspect` reports about one path: its files, partitions, logs and recommendations."""

    path: str
    #: the table's format, or what else the path holds
    kind: str
    file_count: int = 0
    total_bytes: int = 0
    small_file_threshold: int = SMALL_FILE_DEFAULT
    small_files: int = 0
    partitions: tuple[PartitionHealth, ...] = ()
    logs: tuple[ReportedLog, ...] = ()
    policy: ComparedSettings = field(default_factory=FileSizeSettings)
    recommendations: tuple[str, ...] = ()
    #: duplicate rewrites in the log window, for a format whose log can hold them (open ones need `compactor
    #: repair`; repaired ones are history), the window scanned, and warnings
    duplicates: tuple[DuplicateReport, ...] = ()
    log_window: LogWindow | None = None
    warnings: tuple[str, ...] = ()
    #: the text of ``logs``, in the format's words (not in ``to_dict``: ``logs`` is their data)
    sections: tuple[InspectSection, ...] = ()
    #: the path holds a table (False: only logs; the text shows no files then)
    holds_table: bool = True

    @property
    def open_duplicates(self) -> list[DuplicateReport]:
        return [d for d in self.duplicates if d.status == "open"]

    @property
    def small_file_share(self) -> float:
        return self.small_files / self.file_count if self.file_count else 0.0

    @property
    def deleted_rows(self) -> int:
        """Rows soft-deleted in the table's files (readers skip them; a rewrite drops them)."""
        return sum(p.deleted_rows for p in self.partitions)

    def to_dict(self) -> dict[str, Any]:
        return {"path": self.path, "kind": self.kind, "file_count": self.file_count, "total_bytes": self.total_bytes,
                "small_file_threshold": self.small_file_threshold, "small_files": self.small_files,
                "partitions": [asdict(p) for p in self.partitions], "logs": [x.to_dict() for x in self.logs],
                "policy": self.policy.to_dict(), "recommendations": list(self.recommendations),
                "duplicates": [x.to_dict() for x in self.duplicates],
                "log_window": self.log_window.to_dict() if self.log_window is not None else {},
                "warnings": list(self.warnings), "small_file_share": round(self.small_file_share, 4),
                "deleted_rows": self.deleted_rows}


@dataclass(frozen=True)
class InspectFindings:
    """What a table's format adds to its inspect report beside the files (``TableFormat.inspect``): the
    health of its logs (data and text), rows live twice, warnings, and recommendations (after the generic
    ones)."""

    logs: tuple[ReportedLog, ...] = ()
    sections: tuple[InspectSection, ...] = ()
    duplicates: tuple[DuplicateReport, ...] = ()
    log_window: LogWindow | None = None
    warnings: tuple[str, ...] = ()
    recommendations: tuple[str, ...] = ()
