"""What `compactor inspect` reports about a table, a file-sink output or a streaming checkpoint."""

from __future__ import annotations

from dataclasses import asdict, dataclass, field
from typing import Any

#: upper bounds of the histogram buckets (bytes); the last bucket is open
BUCKETS = (1 << 20, 8 << 20, 32 << 20, 128 << 20, 512 << 20)
BUCKET_LABELS = ("<1MB", "1-8MB", "8-32MB", "32-128MB", "128-512MB", ">=512MB")
SMALL_FILE_DEFAULT = 32 << 20
#: driver heap per manifest entry when Spark loads a .compact (SinkFileStatus objects + strings), measured
#: order of magnitude; used only for an estimate
BYTES_PER_ENTRY = 600


@dataclass(frozen=True)
class PartitionHealth:
    partition: str
    files: int
    bytes: int
    small_files: int
    histogram: dict[str, int]


@dataclass(frozen=True)
class LogHealth:
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
    path: str
    kind: str  # delta | spark_file_sink | checkpoint
    file_count: int = 0
    total_bytes: int = 0
    small_file_threshold: int = SMALL_FILE_DEFAULT
    small_files: int = 0
    partitions: tuple[PartitionHealth, ...] = ()
    logs: tuple[LogHealth, ...] = ()
    policy: dict[str, Any] = field(default_factory=dict)
    recommendations: tuple[str, ...] = ()
    #: Delta: duplicate rewrites in the log window (open ones need `compactor repair`; repaired ones are
    #: history), the window scanned, and warnings (auto compaction racing compactor)
    duplicates: tuple[dict[str, Any], ...] = ()
    log_window: dict[str, Any] = field(default_factory=dict)
    warnings: tuple[str, ...] = ()

    @property
    def open_duplicates(self) -> list[dict[str, Any]]:
        return [d for d in self.duplicates if d.get("status") == "open"]

    @property
    def small_file_share(self) -> float:
        return self.small_files / self.file_count if self.file_count else 0.0

    def to_dict(self) -> dict[str, Any]:
        d = asdict(self)
        d["small_file_share"] = round(self.small_file_share, 4)
        return d


