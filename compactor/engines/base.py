"""The engine interface: compute only. An engine rewrites planned bins into new parquet files (one per
bin) and reports what it wrote, rows and statistics read from the footers. It commits nothing: the
table format (formats/delta/rewrite.py, formats/file_sink/run.py) verifies rows and commits."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Protocol

import pyarrow as pa


@dataclass(frozen=True)
class IgnoredColumn:
    """A column a table's readers never read that its writer may store in data files (Delta's change data
    bookkeeping: ``_change_type``, ``__is_cdc``): left out of a rewrite's output once the input's footer
    proves every row holds null or ``value`` (None: null only), which is what such a file's rows must hold."""

    name: str
    value: bool | int | str | None = None


@dataclass(frozen=True)
class BinJob:
    """One bin for an engine to rewrite: its input files, in order, into one new output file."""

    #: absolute locations of the files to read, in order
    inputs: tuple[str, ...]
    #: absolute location of the one output file (a new, unique name inside the partition folder)
    output: str
    #: a `_`-prefixed folder next to the output the engine may use for intermediate files
    staging: str
    #: sort the rows of this bin by these columns (strategy sort)
    sort_by: tuple[str, ...] = ()
    #: the table's partition columns: some writers also store them in data files, where they are dropped
    partition_columns: tuple[str, ...] = ()
    #: columns the table's readers ignore, dropped once proved on each input's footer (footer_check.dropped)
    ignored: tuple[IgnoredColumn, ...] = ()


@dataclass(frozen=True)
class WrittenFile:
    """What an engine wrote for one BinJob: the output's location, size, rows and statistics."""

    location: str
    size: int
    #: rows in the output footer, and the sum of rows in the input footers
    rows: int
    rows_in: int
    #: Delta statistics JSON (numRecords, minValues, maxValues, nullCount) from the output footer
    stats: str


class RewriteEngine(Protocol):
    name: str

    def versions(self) -> dict[str, str]:
        """Engine library versions for run results."""

    def rewrite(self, jobs: Sequence[BinJob], schema: pa.Schema,
                on_done: Callable[[BinJob, WrittenFile], None] | None = None) -> list[WrittenFile]:
        """Write one file per job with exactly ``schema`` (the table's data columns: no partition
        columns, microsecond timestamps, never INT96), as the engine schedules them (local: a thread per
        bin, max_concurrent_rewrites at once; spark: one Spark job per call). Returns the files in job order; ``on_done`` is called as each job finishes (progress).
        On failure it raises; outputs already written stay for the caller's journal to clean up."""

    def close(self) -> None:
        """Release resources (a SparkSession this engine created, ...)."""


def reporting(fn: Callable[[BinJob], WrittenFile],
              on_done: Callable[[BinJob, WrittenFile], None] | None) -> Callable[[BinJob], WrittenFile]:
    """``fn`` that also reports each finished job to ``on_done``."""
    if on_done is None:
        return fn

    def run(job: BinJob) -> WrittenFile:
        written = fn(job)
        on_done(job, written)
        return written

    return run
