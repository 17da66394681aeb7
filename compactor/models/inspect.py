"""What `compactor inspect` reports about a table, a file-sink output or a streaming checkpoint."""

from __future__ import annotations

from dataclasses import asdict, dataclass, field
from typing import Any

from compactor.models.duplicates import DuplicateReport, LogWindow

#: upper bounds of the histogram buckets (bytes); the last bucket is open
BUCKETS = (1 << 20, 8 << 20, 32 << 20, 128 << 20, 512 << 20)
BUCKET_LABELS = ("<1MB", "1-8MB", "8-32MB", "32-128MB", "128-512MB", ">=512MB")
SMALL_FILE_DEFAULT = 32 << 20
#: driver heap per manifest entry when Spark loads a .compact (SinkFileStatus objects + strings), measured
#: order of magnitude; used only for an estimate
BYTES_PER_ENTRY = 600


@dataclass(frozen=True)
class SinkLogSettings:
    """A file-sink policy's log settings (its ``sink:`` block) that inspect compares the logs against."""

    compact_interval: int | None = None
    min_batches_to_retain: int | None = None
    #: seconds (the sink writeStream option ``retention``)
    retention: int | None = None


@dataclass(frozen=True)
class InspectSettings:
    """The settings of the policy that manages the table, that inspect compares against; the default:
    no policy (nothing to compare)."""

    min_file_size: int | None = None
    #: a file-sink policy's log settings (None: not a sink policy)
    sink: SinkLogSettings | None = None

    @property
    def compact_interval(self) -> int | None:
        return self.sink.compact_interval if self.sink is not None else None

    @property
    def min_batches_to_retain(self) -> int | None:
        return self.sink.min_batches_to_retain if self.sink is not None else None

    @property
    def retention(self) -> int | None:
        return self.sink.retention if self.sink is not None else None

    def to_dict(self) -> dict[str, Any]:
        """Only the settings the policy has (a sink policy: its log settings, even unset)."""
        out: dict[str, Any] = {} if self.min_file_size is None else {"min_file_size": self.min_file_size}
        if self.sink is not None:
            out.update(asdict(self.sink))
        return out


@dataclass(frozen=True)
class PartitionHealth:
    """One partition's files: how many, their bytes, how many are small, and a histogram of sizes."""

    partition: str
    files: int
    bytes: int
    small_files: int
    histogram: dict[str, int]


@dataclass(frozen=True)
class LogHealth:
    """The health of one Spark metadata log: batches, compact interval, manifest growth, driver memory."""

    directory: str
    log_files: int
    latest_batch: int | None
    latest_compact: str | None
    compact_interval: int
    entries: int
    newest_compact_bytes: int
    growth_bytes_per_batch: float | None
    retained_batch_files: int
    estimated_driver_memory_bytes: int


@dataclass(frozen=True)
class InspectReport:
    """What `compactor inspect` reports about one path: its files, partitions, logs and recommendations."""

    path: str
    kind: str  # delta | spark_file_sink | checkpoint
    file_count: int = 0
    total_bytes: int = 0
    small_file_threshold: int = SMALL_FILE_DEFAULT
    small_files: int = 0
    partitions: tuple[PartitionHealth, ...] = ()
    logs: tuple[LogHealth, ...] = ()
    policy: InspectSettings = field(default_factory=InspectSettings)
    recommendations: tuple[str, ...] = ()
    #: Delta: duplicate rewrites in the log window (open ones need `compactor repair`; repaired ones are
    #: history), the window scanned, and warnings (auto compaction racing compactor)
    duplicates: tuple[DuplicateReport, ...] = ()
    log_window: LogWindow | None = None
    warnings: tuple[str, ...] = ()

    @property
    def open_duplicates(self) -> list[DuplicateReport]:
        return [d for d in self.duplicates if d.status == "open"]

    @property
    def small_file_share(self) -> float:
        return self.small_files / self.file_count if self.file_count else 0.0

    def to_dict(self) -> dict[str, Any]:
        d = asdict(self)
        d["policy"] = self.policy.to_dict()
        d["duplicates"] = [x.to_dict() for x in self.duplicates]
        d["log_window"] = self.log_window.to_dict() if self.log_window is not None else {}
        d["small_file_share"] = round(self.small_file_share, 4)
        return d


@dataclass(frozen=True)
class InspectFindings:
    """What a table's format adds to its inspect report beside the files (``TableFormat.inspect``): the
    health of its logs, rows live twice, warnings, and recommendations (after the generic ones)."""

    logs: tuple[LogHealth, ...] = ()
    duplicates: tuple[DuplicateReport, ...] = ()
    log_window: LogWindow | None = None
    warnings: tuple[str, ...] = ()
    recommendations: tuple[str, ...] = ()
