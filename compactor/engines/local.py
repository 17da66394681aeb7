"""The local engine (no JVM): pyarrow reads each bin's files and writes one file per bin.

Bins run in parallel, max_concurrent_rewrites at once: on local storage, a call of many files in worker
processes forked for the call (engines/worker_processes.py: reading and checking many small files is
mostly Python work, which threads cannot run in parallel), otherwise on a thread pool. Each bin streams:
its files are read in order (on object stores a few ahead of the writer, on a reader pool), the rows each
input drops (BinInput.drop) left out by position, conformed to the table's schema (columns added by
schema evolution are filled with nulls, types cast to the table's) and buffered until a row group is
full, so memory per bin stays near one row group however large the bin.

Every input up to WHOLE_FILE_BYTES is read whole into memory first, and parquet decodes it from there:
on object stores that is one GET (no HEAD, no footer probe, no range reads: compaction inputs are small
files, and a request costs more than the bytes); on local disk one read() instead of the reader's seeks
and small reads for the footer and each column chunk (about half the time per small file, measured in
docs/benchmarks.md). On object stores the reader pool is wider, since those reads wait on the network
rather than the CPU."""

from __future__ import annotations

import inspect
import os
from collections import deque
from collections.abc import Callable, Iterator, Mapping, Sequence
from concurrent.futures import Future, ThreadPoolExecutor
from functools import partial
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq
from pyarrow._parquet import ParquetReader

from compactor.engines import worker_processes
from compactor.engines.base import BinInput, BinJob, WrittenFile, reporting
from compactor.engines.footer_check import column_problem, dropped, rename_problem
from compactor.engines.footer_facts import check_written, footer_facts
from compactor.errors import ApplyError, VerificationError
from compactor.runtime.faults import crash_point
from compactor.runtime.paths import filesystem, is_remote, local_path

#: a row group is written when this many rows or bytes (in memory) are buffered
ROW_GROUP_ROWS = 1 << 20
ROW_GROUP_BYTES = 128 << 20
#: input files read ahead of each bin's writer (on object stores each is one GET of the whole file)
READ_AHEAD = 8
#: a call with at least this many input files (and more than one bin) rewrites its bins in worker
#: processes, max_concurrent_rewrites at once (engines/worker_processes.py); below, forking costs more
#: than it saves
PROCESS_MIN_FILES = 200
#: local inputs up to this size are read whole before decoding; larger ones (a sort or z-order bin's
#: big files) are decoded from the file, so memory stays near the decoded rows
WHOLE_FILE_BYTES = 64 << 20
#: local inputs are read in batches of at most this many files and bytes, one step over the whole batch
#: at a time (all reads, then all footers, then all decodes)
BATCH_FILES = 16
BATCH_BYTES = 16 << 20


def conform(table: pa.Table, schema: pa.Schema, droppable: tuple[str, ...] = ()) -> pa.Table:
    """``table`` with exactly ``schema``'s columns: missing ones null (a file written before the column
    was added), others cast, ``droppable`` ones (footer_check.dropped) dropped. A file
    that lacks a column of the schema and holds one the schema does not know is refused: that is a
    rename the file predates, and filling the new name with nulls would lose the values."""
    if table.schema.equals(schema):  # the usual case: the file has the table's columns, types and nullability
        return pa.Table.from_arrays(table.columns, schema=schema)
    problem = rename_problem(table.schema, schema, droppable)
    if problem:
        raise VerificationError(f"{problem}; nothing was committed")
    cols = []
    for field in schema:
        i = table.schema.get_field_index(field.name)
        if i < 0:
            cols.append(pa.nulls(table.num_rows, field.type))
        else:
            col = table.column(i)
            cols.append(col if col.type == field.type else col.cast(field.type))
    return pa.Table.from_arrays(cols, schema=schema)


class LocalEngine:
    name = "local"

    def __init__(self, storage_options: Mapping[str, str] | None = None, threads: int | None = None) -> None:
        self.storage_options = dict(storage_options or {})
        self.threads = threads or os.cpu_count() or 1

    def versions(self) -> dict[str, str]:
        return {"pyarrow": pa.__version__}

    def rewrite(self, jobs: Sequence[BinJob], schema: pa.Schema,
                on_done: Callable[[BinJob, WrittenFile], None] | None = None) -> list[WrittenFile]:
        remote = any(is_remote(j.output) for j in jobs)
        if not remote and self.threads > 1 and len(jobs) > 1 and worker_processes.available() \
                and sum(len(j.inputs) for j in jobs) >= PROCESS_MIN_FILES:
            one_bin = partial(_rewrite_alone, schema=schema, storage_options=self.storage_options)
            return worker_processes.run_bins(one_bin, jobs, self.threads, on_done)
        # on object stores, inputs are read on their own pool, a few files ahead of each bin's writer (those
        # reads wait on the network); local files are read by the bin's own thread (a reader thread would
        # only contend for the interpreter lock: 4.7 s against 6.2 s for 20,000 files, measured)
        readers = ThreadPoolExecutor(max_workers=max(self.threads, READ_AHEAD), thread_name_prefix="read") \
            if remote else None
        try:
            one = reporting(lambda j: self._rewrite_bin(j, schema, readers), on_done)
            if len(jobs) <= 1 or self.threads <= 1:
                return [one(j) for j in jobs]
            with ThreadPoolExecutor(max_workers=min(self.threads, len(jobs)), thread_name_prefix="bin") as bins:
                return list(bins.map(one, jobs))
        finally:
            if readers is not None:
                readers.shutdown()

    def _read(self, source: BinInput, schema: pa.Schema, job: BinJob) -> tuple[int, pa.Table, Any]:
        """(rows in the footer, the file's kept rows conformed to ``schema``, (footer, the file's kept columns))."""
        location = source.location
        try:
            if is_remote(location):
                from compactor.runtime.storage import locate

                storage, rel = locate(location, self.storage_options)
                reader = _open(pa.BufferReader(storage.read_bytes(rel)))
            else:
                reader = _open(_local_source(local_path(location))[0])
            return _decoded(reader, reader.read_all(use_threads=False), schema, job, source.drop)
        except (OSError, pa.ArrowException) as e:
            raise _unreadable(location, e) from None

    def _inputs(self, job: BinJob, schema: pa.Schema,
                readers: ThreadPoolExecutor | None) -> Iterator[tuple[int, pa.Table, Any]]:
        """The bin's files in order, read up to READ_AHEAD files ahead on ``readers`` (None: here, one by one)."""
        if readers is None:
            yield from _local_inputs(job, schema)
            return
        pending: deque[Future[tuple[int, pa.Table, Any]]] = deque()
        todo = iter(job.inputs)
        for source in todo:
            pending.append(readers.submit(self._read, source, schema, job))
            if len(pending) >= READ_AHEAD:
                break
        while pending:
            done = pending.popleft().result()
            nxt = next(todo, None)
            if nxt is not None:
                pending.append(readers.submit(self._read, nxt, schema, job))
            yield done

    def _rewrite_bin(self, job: BinJob, schema: pa.Schema, readers: ThreadPoolExecutor | None) -> WrittenFile:
        fs, out = filesystem(job.output, self.storage_options)
        rows_in = 0
        buffered: list[pa.Table] = []
        buffered_rows = buffered_bytes = 0
        tables: list[pa.Table] = []  # sort: the whole bin (z-order and sort rewrite whole partitions)
        footers: list[Any] = []
        writer: Any = None if job.sort_by else pq.ParquetWriter(out, schema, filesystem=fs, **WRITE_OPTIONS)
        try:
            for footer_rows, table, footer in self._inputs(job, schema, readers):
                rows_in += footer_rows
                footers.append(footer)
                if job.sort_by:
                    tables.append(table)
                    continue
                buffered.append(table)
                buffered_rows += table.num_rows
                buffered_bytes += table.get_total_buffer_size()
                if buffered_rows >= ROW_GROUP_ROWS or buffered_bytes >= ROW_GROUP_BYTES:
                    writer.write_table(pa.concat_tables(buffered), row_group_size=ROW_GROUP_ROWS)
                    buffered, buffered_rows, buffered_bytes = [], 0, 0
            if job.sort_by:
                data = pa.concat_tables(tables).sort_by([(c, "ascending") for c in job.sort_by])
                pq.write_table(data, out, filesystem=fs, row_group_size=ROW_GROUP_ROWS, **WRITE_OPTIONS)
            elif buffered:
                writer.write_table(pa.concat_tables(buffered), row_group_size=ROW_GROUP_ROWS)
        finally:
            if writer is not None:
                writer.close()
        written = pq.ParquetFile(out, filesystem=fs)
        check_written(written, schema, out)
        md = written.metadata
        drops = [len(i.drop) for i in job.inputs] if job.rows_dropped else []
        problem = column_problem(footers, md, written.schema_arrow, drops)
        if problem:
            raise VerificationError(f"the rewrite of {len(job.inputs)} file(s) into {job.output}: {problem}; nothing "
                                    "was committed")
        return WrittenFile(job.output, fs.get_file_info(out).size, md.num_rows, rows_in, job.rows_dropped,
                           footer_facts(md, written.schema_arrow))

    def close(self) -> None:
        pass


def _rewrite_alone(job: BinJob, *, schema: pa.Schema, storage_options: Mapping[str, str]) -> WrittenFile:
    """One bin of local files, read in this thread (a worker process's task)."""
    crash_point("engine.worker_bin")
    return LocalEngine(storage_options, threads=1)._rewrite_bin(job, schema, None)


def _decoded(reader: ParquetReader, table: pa.Table, schema: pa.Schema, job: BinJob,
             rows: frozenset[int] = frozenset()) -> tuple[int, pa.Table, Any]:
    """What a read of one input gives: (rows in the footer, the rows but those at positions ``rows``,
    conformed to ``schema``, (footer, the file's columns but those the rewrite leaves out:
    footer_check.dropped))."""
    md, file_schema = reader.metadata, reader.schema_arrow
    drop = dropped(md, file_schema, job)
    kept = pa.schema([f for f in file_schema if f.name not in drop]) if drop else file_schema
    return md.num_rows, conform(without_rows(table, rows), schema, drop), (md, kept)


def without_rows(table: pa.Table, positions: frozenset[int]) -> pa.Table:
    """``table`` less the rows at ``positions`` (0 is its first row; a position past its end drops
    nothing, which verification then reports: the output holds a row more than expected)."""
    if not positions:
        return table
    import pyarrow.compute as pc  # only here: an apply that drops nothing never loads it (tests/cli/test_lean_imports.py)

    # each row's position, built in Arrow (a Python range of a million rows takes 0.8 s, this 10 ms)
    index = pc.subtract(pc.cumulative_sum(pa.repeat(pa.scalar(1, pa.int64()), table.num_rows)), 1)
    gone = pc.is_in(index, value_set=pa.array(sorted(positions), pa.int64()))
    return table.filter(pc.invert(gone))


def _unreadable(location: str, e: Exception) -> ApplyError:
    return ApplyError(f"cannot read {location}: {str(e).splitlines()[0]}")


def _local_source(path: str) -> tuple[Any, int]:
    """(what to open: the whole file in memory when it is small, else its path; bytes held in memory)."""
    # a bare descriptor: a file object's set-up is about 4 us of the 12 a small file's read takes
    fd = os.open(path, os.O_RDONLY | getattr(os, "O_BINARY", 0))
    try:
        size = os.fstat(fd).st_size
        if size > WHOLE_FILE_BYTES:
            return path, 0
        data = os.read(fd, size + 1)
        if len(data) != size:  # a short read (some network file systems) or a file that changed: to the end
            rest = [data]
            while chunk := os.read(fd, 1 << 20):
                rest.append(chunk)
            data = b"".join(rest)
    finally:
        os.close(fd)
    return pa.BufferReader(data), len(data)


def _local_inputs(job: BinJob, schema: pa.Schema) -> Iterator[tuple[int, pa.Table, Any]]:
    """A bin's local inputs in order, as LocalEngine._read gives them, read in batches: each step runs over a
    whole batch before the next (read every file, then open every footer, then decode each). File by file,
    the system calls, the footer parser and the decoder take turns evicting each other from the CPU's caches:
    a batch of 16 small files takes about 40% less time per file (measured in docs/benchmarks.md)."""
    inputs, i = job.inputs, 0
    location = ""
    try:
        while i < len(inputs):
            batch: list[tuple[BinInput, Any]] = []
            held = 0
            while i < len(inputs) and len(batch) < BATCH_FILES and held < BATCH_BYTES:
                location = inputs[i].location
                source, size = _local_source(local_path(location))
                batch.append((inputs[i], source))
                held += size
                i += 1
            opened = []
            for one, source in batch:
                location = one.location
                opened.append((one, _open(source)))
            decoded = []
            for one, reader in opened:
                location = one.location
                decoded.append((one, reader, reader.read_all(use_threads=False)))
            for one, reader, table in decoded:
                location = one.location  # names the file in an error below
                yield _decoded(reader, table, schema, job, one.drop)
    except (OSError, pa.ArrowException) as e:
        raise _unreadable(location, e) from None


#: what pq.ParquetFile passes to its reader by default where this pyarrow has the option (extension types
#: such as UUID decoded as ParquetFile decodes them)
_OPEN_OPTIONS = {name: p.default for name, p in inspect.signature(pq.ParquetFile.__init__).parameters.items()
                 if name == "arrow_extensions_enabled"}


def _open(source: Any) -> ParquetReader:
    """The reader pq.ParquetFile wraps, without the wrapper: a compaction reads thousands of small files, and
    the wrapper's set-up (column paths for selecting by name, source checks) is about a tenth of the time
    spent on each (measured in docs/benchmarks.md). Opened with ParquetFile's defaults."""
    reader = ParquetReader()
    reader.open(source, **_OPEN_OPTIONS)
    return reader


#: how compactor writes parquet: what Spark's and the table formats' readers expect of a data file
WRITE_OPTIONS: dict[str, Any] = {
    "compression": "snappy", "coerce_timestamps": "us", "allow_truncated_timestamps": False,
    "use_deprecated_int96_timestamps": False, "write_statistics": True,
}
