"""What `compactor report` draws, per table: its files now and before the last apply, its partitions, the
plan's promise, the apply runs that touched it, and the growth of its metadata logs."""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import NamedTuple


class LogPoint(NamedTuple):
    """One file of a metadata log: its batch (or version), bytes, entries, and whether it is a compaction
    of the log (a file that lists every entry so far)."""

    batch: int
    size: int
    entries: int
    compact: bool


@dataclass(frozen=True)
class LogSeries:
    """One metadata log, file by file, as the table's format lists it for the report's two charts."""

    #: the charts' id: ``data-chart="<chart>-bytes"`` and ``"<chart>-entries"``
    chart: str
    #: the charts' title: the log, as its format names it
    title: str
    points: list[LogPoint]
    #: the name of the writer's source whose log this is; None: the table's own log
    source: str | None = None


@dataclass(frozen=True)
class LogGrowth:
    """A table's metadata logs, file by file (``TableFormat.log_growth``): its own, and those of the
    sources its writer reads, in the order the report draws them; empty for a format with none to draw."""

    logs: tuple[LogSeries, ...] = ()


@dataclass
class RunPoint:
    """One apply run as it touched one table."""

    run_id: str
    finished_at: str
    files_removed: int
    files_added: int
    bytes_rewritten: int
    files_after: int | None = None
    mean_size_after: float | None = None


@dataclass
class TableReport:
    """What `compactor report` draws for one table: file sizes now and before, partitions, the plan, runs, logs."""

    name: str
    format: str
    path: str
    target_file_size: int
    min_file_size: int
    sizes_now: list[int] = field(default_factory=list)
    sizes_before: list[int] | None = None
    #: partition label -> (files, small files, bytes)
    partitions: dict[str, tuple[int, int, int]] = field(default_factory=dict)
    #: partition label -> rows its files hold that the format marks deleted (only partitions holding some)
    deleted_rows: dict[str, int] = field(default_factory=dict)
    planned: set[str] = field(default_factory=set)
    #: what the plan promises: files before -> after, bytes it rewrites
    plan_files_before: int = 0
    plan_files_after: int = 0
    plan_bytes: int = 0
    #: the files the plan's rewrites take (the small files it merges)
    plan_input_files: int = 0
    #: the planner's words for the table, as `plan` prints them (planning/explain.py table_verdict)
    verdict: list[str] = field(default_factory=list)
    #: the apply runs in history that touched the table, oldest first
    trend: list[RunPoint] = field(default_factory=list)
    #: the table's metadata logs, file by file, as its format lists them (``TableFormat.log_growth``)
    logs: tuple[LogSeries, ...] = ()
    error: str | None = None

    @property
    def manifest(self) -> list[LogPoint]:
        """The table's own metadata log, file by file (empty: none drawn)."""
        return next((s.points for s in self.logs if s.source is None), [])

    @property
    def checkpoint_sources(self) -> dict[str, list[LogPoint]]:
        """The log of each source the table's writer reads, by the source's name."""
        return {s.source: s.points for s in self.logs if s.source is not None}

    @property
    def benefit(self) -> int:
        """Files the current plan removes: how the report orders tables."""
        return max(0, self.plan_files_before - self.plan_files_after)

    def ideal_files(self, label: str) -> int:
        """The fewest files a partition's bytes fit in at the target size."""
        return max(1, math.ceil(self.partitions[label][2] / max(1, self.target_file_size)))

    def small_share(self, label: str) -> float:
        """Share of a partition's files that are small and could be merged: 0 for a partition already at
        its ideal file count (one 200 KiB file under a 128 MiB target is as compact as it gets)."""
        files, small, _ = self.partitions[label]
        return 0.0 if files <= self.ideal_files(label) else small / max(1, files)

    @property
    def mergeable_small_files(self) -> int:
        return sum(self.partitions[k][1] for k in self.partitions if self.small_share(k) > 0)
