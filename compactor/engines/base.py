"""The engine interface: compute only. An engine rewrites planned bins into new parquet files (one per
bin), leaving out the rows each input no longer holds, and reports what it wrote: rows and each column's
facts, read from the footers. It commits nothing and knows no table format: the format turns the facts
into its own statistics, verifies rows and commits."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Protocol

import pyarrow as pa

from compactor.engines.footer_facts import FooterFacts


@dataclass(frozen=True)
class IgnoredColumn:
    """A column a table's readers never read that its writer may store in data files (a format's own
    bookkeeping, named by the format): left out of a rewrite's output once the input's footer
    proves every row holds null or ``value`` (None: null only), which is what such a file's rows must hold."""

    name: str
    value: bool | int | str | None = None


@dataclass(frozen=True)
class BinInput:
    """One input file of a bin, and the rows of it the output leaves out: those the table no longer holds
    though the file still does (a format's row-level deletes), by their position in the file, counted from
    0 over all its row groups."""

    #: the file's absolute location
    location: str
    #: positions of the rows to leave out (empty: every row is kept)
    drop: frozenset[int] = frozenset()


def inputs_at(*locations: str) -> tuple[BinInput, ...]:
    """Inputs whose every row is kept."""
    return tuple(BinInput(loc) for loc in locations)


@dataclass(frozen=True)
class BinJob:
    """One bin for an engine to rewrite: its input files, in order, into one new output file."""

    #: the files to read, in order, each with the rows to leave out
    inputs: tuple[BinInput, ...]
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

    @property
    def locations(self) -> tuple[str, ...]:
        return tuple(i.location for i in self.inputs)

    @property
    def rows_dropped(self) -> int:
        """Rows the job asks to leave out (a position the file does not have counts too: the output then
        holds more rows than the inputs less this, and verification fails)."""
        return sum(len(i.drop) for i in self.inputs)


@dataclass(frozen=True)
class WrittenFile:
    """What an engine wrote for one BinJob: the output's location, size, rows and footer facts."""

    location: str
    size: int
    #: rows in the output footer, and the sum of rows in the input footers
    rows: int
    rows_in: int
    #: the rows the job asked to leave out (BinJob.rows_dropped)
    rows_dropped: int
    #: the output footer's facts: rows, and per leaf column its null count, min and max
    facts: FooterFacts

    @property
    def rows_kept(self) -> int:
        """The rows the output must hold: the inputs' rows less those left out."""
        return self.rows_in - self.rows_dropped


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
