"""The local engine (no JVM): pyarrow reads each bin's files and writes one file per bin.

Bins run in parallel on a thread pool (pyarrow decodes and encodes without the GIL). Each bin streams:
one input file at a time is read, conformed to the table's schema (columns added by schema evolution
are filled with nulls, types cast to the table's) and buffered until a row group is full, so memory per
bin stays near one row group however large the bin.

On object stores every input is fetched whole with one GET (no HEAD, no footer probe, no range reads:
compaction inputs are small files, and a request costs more than the bytes), up to ``PREFETCH`` of them
in flight per bin ahead of the one being decoded, in order."""

from __future__ import annotations

import os
from collections import deque
from concurrent.futures import Future, ThreadPoolExecutor
from typing import Any, Iterator, Mapping, Sequence

import pyarrow as pa
import pyarrow.parquet as pq

from compactor.engines.base import BinJob, WrittenFile
from compactor.engines.parquet_stats import check_written_schema, footer_stats
from compactor.runtime.paths import filesystem, is_remote

#: a row group is written when this many rows or bytes (in memory) are buffered
ROW_GROUP_ROWS = 1 << 20
ROW_GROUP_BYTES = 128 << 20
#: object stores: input files fetched ahead per bin, and the bytes fetched but not yet decoded that stop
#: further prefetching
PREFETCH = 8
PREFETCH_BYTES = 256 << 20


def conform(table: pa.Table, schema: pa.Schema) -> pa.Table:
    """``table`` with exactly ``schema``'s columns: missing ones null, others cast, extra ones dropped."""
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
        import deltalake

        return {"deltalake": deltalake.__version__, "pyarrow": pa.__version__}

    def rewrite(self, jobs: Sequence[BinJob], schema: pa.Schema) -> list[WrittenFile]:
        if len(jobs) <= 1 or self.threads <= 1:
            return [self._rewrite_bin(j, schema) for j in jobs]
        with ThreadPoolExecutor(max_workers=min(self.threads, len(jobs)), thread_name_prefix="rewrite") as pool:
            return list(pool.map(lambda j: self._rewrite_bin(j, schema), jobs))

    def _rewrite_bin(self, job: BinJob, schema: pa.Schema) -> WrittenFile:
        fs, out = filesystem(job.output, self.storage_options)
        rows_in = 0
        buffered: list[pa.Table] = []
        buffered_rows = buffered_bytes = 0
        tables: list[pa.Table] = []  # sort: the whole bin (z-order and sort rewrite whole partitions)
        writer = None if job.sort_by else pq.ParquetWriter(out, schema, filesystem=fs, **WRITE_OPTIONS)
        try:
            for pf in self._inputs(job.inputs):
                rows_in += pf.metadata.num_rows
                table = conform(pf.read(use_threads=False), schema)
                if job.sort_by:
                    tables.append(table)
                    continue
                buffered.append(table)
                buffered_rows += table.num_rows
                buffered_bytes += table.nbytes
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
        check_written_schema(out, schema, fs)
        rows, stats = footer_stats(out, fs)
        return WrittenFile(job.output, fs.get_file_info(out).size, rows, rows_in, stats)

    def _inputs(self, locations: Sequence[str]) -> Iterator[pq.ParquetFile]:
        """The input files in order: opened in place on local disk, fetched ahead on object stores."""
        if not any(is_remote(loc) for loc in locations):
            for loc in locations:
                fs, path = filesystem(loc, self.storage_options)
                yield pq.ParquetFile(path, filesystem=fs)
            return
        from compactor.runtime.storage import locate

        def fetch(loc: str) -> bytes:
            storage, rel = locate(loc, self.storage_options)
            return storage.read_bytes(rel)

        pending: deque[Future[bytes]] = deque()
        todo = iter(locations)
        with ThreadPoolExecutor(max_workers=PREFETCH, thread_name_prefix="prefetch") as pool:
            try:
                while True:
                    ready = sum(len(f.result()) for f in pending if f.done() and not f.exception())
                    while len(pending) < PREFETCH and ready < PREFETCH_BYTES:
                        loc = next(todo, None)
                        if loc is None:
                            break
                        pending.append(pool.submit(fetch, loc))
                    if not pending:
                        return
                    yield pq.ParquetFile(pa.BufferReader(pending.popleft().result()))
            finally:
                for f in pending:
                    f.cancel()

    def close(self) -> None:
        pass


#: how compactor writes parquet: what Spark and delta-rs readers expect of a Delta data file
WRITE_OPTIONS: dict[str, Any] = {
    "compression": "snappy", "coerce_timestamps": "us", "allow_truncated_timestamps": False,
    "use_deprecated_int96_timestamps": False, "write_statistics": True,
}
