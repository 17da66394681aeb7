"""The local rewrite of one Iceberg bin (no JVM): read exactly the bin's data files through pyiceberg (columns
resolved by field id across schema evolution, position deletes applied), write them as one Parquet file in
the table's data location, in its current schema and partition spec, and verify it before anything
commits: the rows written equal the rows read after deletes, every input's footer holds the rows its
manifest entry says, every row falls in the output's one partition, and column by column the output's
footer holds what the inputs' footers say (engines/footer_check.column_problem, the same check the
engines run, with each input's columns named as the table names them now).

Output names are ``00000-<n>-<run id>.parquet`` with ``n`` from one counter per run (OutputNames), shared by
every bin: pyiceberg's own writer numbers each call's files from 0, so two calls with one id overwrite each
other's outputs. A refused or failed bin deletes its output; the caller deletes the outputs of bins whose
commit is refused (``discard``)."""

from __future__ import annotations

import itertools
import threading
import time
import uuid
from collections.abc import Callable, Iterable, Iterator, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, cast

import pyarrow as pa
import pyarrow.parquet as pq

from compactor.engines.footer_check import column_problem
from compactor.engines.footer_facts import FIELD_ID, FooterFacts, check_written, footer_facts
from compactor.engines.local import ROW_GROUP_BYTES, ROW_GROUP_ROWS
from compactor.errors import ApplyError, VerificationError
from compactor.formats.iceberg.support import check_bin

if TYPE_CHECKING:
    from pyiceberg.manifest import DataFile
    from pyiceberg.partitioning import PartitionKey, PartitionSpec
    from pyiceberg.schema import Schema
    from pyiceberg.table import Table

    from compactor.formats.iceberg.state import IcebergState


class OutputNames:
    """The names of the files one run writes: ``00000-<n>-<run id>.parquet``, ``n`` counted over the run."""

    def __init__(self, run_id: uuid.UUID | None = None) -> None:
        self.run_id = run_id or uuid.uuid4()
        self._count = itertools.count(0)
        self._lock = threading.Lock()

    def next(self) -> str:
        with self._lock:
            n = next(self._count)
        return f"00000-{n}-{self.run_id}.parquet"


@dataclass(frozen=True)
class RewrittenBin:
    """One bin rewritten and verified, not committed: its inputs and its output (replace.py commits it)."""

    #: the data files the bin replaces
    inputs: tuple[str, ...]
    #: the new data file (pyiceberg's DataFile, with its metrics); None when deletes had removed every row
    output: DataFile | None
    #: rows in the inputs' footers, rows their deletes removed, rows written
    rows_in: int
    rows_deleted: int
    rows_out: int
    #: the output footer's facts (None: no output)
    facts: FooterFacts | None = field(repr=False)
    seconds: float

    @property
    def output_path(self) -> str | None:
        return str(self.output.file_path) if self.output is not None else None


class _RenamedFooter:
    """An input's footer whose top-level column paths read as the table names the columns now (by field id):
    footer_check compares columns by name, and an Iceberg file keeps the names it was written with."""

    def __init__(self, md: pq.FileMetaData, names: dict[str, str]) -> None:
        self._md, self._names = md, names
        self.schema = self
        self.num_rows, self.num_columns, self.num_row_groups = md.num_rows, md.num_columns, md.num_row_groups

    def row_group(self, i: int) -> pq.RowGroupMetaData:
        return self._md.row_group(i)

    def column(self, i: int) -> _Path:
        head, dot, rest = self._md.schema.column(i).path.partition(".")
        return _Path(self._names.get(head, head) + dot + rest)


@dataclass(frozen=True)
class _Path:
    path: str


def _as_table_names(md: pq.FileMetaData, arrow: pa.Schema, schema: Schema) -> tuple[pq.FileMetaData, pa.Schema]:
    """(footer, arrow schema) of an input with its top-level columns named as ``schema`` names them; columns
    the table dropped are left out (their values are gone from the table)."""
    names: dict[str, str] = {}
    fields = []
    for f in arrow:
        raw = (f.metadata or {}).get(FIELD_ID)
        if raw is None:  # no field id (a file written before the table was Iceberg): by name
            fields.append(f)
            continue
        name = schema.find_column_name(int(raw))
        if name is None or "." in name:
            continue  # dropped, or not a top-level column any more
        current = schema.find_field(int(raw))
        names[f.name] = current.name
        fields.append(f.with_name(current.name))
    if all(k == v for k, v in names.items()):
        return md, pa.schema(fields)
    return cast("pq.FileMetaData", _RenamedFooter(md, names)), pa.schema(fields)


def _partition_key(table: Table, batch: pa.Table) -> PartitionKey | None:
    """The one partition of the table's current spec every row of ``batch`` falls in (None: unpartitioned);
    VerificationError when they fall in more than one."""
    import pyarrow.compute as pc
    from pyiceberg.partitioning import PartitionFieldValue, PartitionKey

    spec: PartitionSpec = table.spec()
    if not spec.fields:
        return None
    schema = table.schema()
    values = []
    for pf in spec.fields:
        name = schema.find_column_name(pf.source_id)
        if name is None:
            raise VerificationError(f"the source column of partition field {pf.name} is not in the table's schema")
        head, *rest = name.split(".")
        column = batch.column(head)
        if rest:
            column = pc.struct_field(column, rest)
        transformed = pf.transform.pyarrow_transform(schema.find_type(pf.source_id))(column)
        distinct = pc.unique(transformed).to_pylist()
        if len(distinct) != 1:
            raise VerificationError(f"its rows fall in {len(distinct)} partitions of the table's current spec "
                                    f"(field {pf.name}); a bin is rewritten into one partition")
        values.append(PartitionFieldValue(pf, distinct[0]))
    return PartitionKey(field_values=values, partition_spec=spec, schema=schema)


#: arrow types a Parquet column reads back as either way (the cast to the table's schema makes them one)
_SAME_TYPE = {pa.large_string(): pa.string(), pa.large_binary(): pa.binary()}


def _columns(schema: pa.Schema | pa.StructType) -> tuple[tuple[str, str, object], ...]:
    """Each column's name, field id and type, nested columns' too; nullability left out (the cast to the
    table's schema checks it) and large and plain strings and binaries the same."""
    out = []
    for f in schema:
        t = f.type
        if pa.types.is_struct(t):
            kind: object = _columns(t)
        elif pa.types.is_list(t) or pa.types.is_large_list(t):
            kind = ("list", _columns(pa.schema([t.value_field])))
        elif pa.types.is_map(t):
            kind = ("map", _columns(pa.schema([t.key_field, t.item_field])))
        else:
            kind = str(_SAME_TYPE.get(t, t))
        out.append((f.name, (f.metadata or {}).get(FIELD_ID, b"").decode(), kind))
    return tuple(out)


def _read(table: Table, state: IcebergState, paths: Sequence[str], target: pa.Schema) -> Iterator[tuple[str, pa.Table]]:
    """Each input's rows after its position deletes, in the table's current schema, one file at a time. A file
    with no deletes whose columns are the table's own (the same names, types and field ids, nested ones too:
    ``target``) is read as it is (pyiceberg's projection of it is the identity, and costs several times the
    read); any other goes through pyiceberg's scan."""
    from pyiceberg.expressions import AlwaysTrue
    from pyiceberg.io.pyarrow import ArrowScan

    scan = ArrowScan(table.metadata, table.io, table.schema(), AlwaysTrue())
    want = _columns(target)
    for path in paths:
        data = state.live.data[path]
        try:
            if not data.deletes and data.file.file_format.value == "PARQUET":
                with table.io.new_input(path).open() as f:
                    rows = pq.read_table(f)
                if _columns(rows.schema) == want:
                    yield path, rows
                    continue
            yield path, scan.to_table([data.scan_task()])
        except Exception as e:  # pyiceberg, pyarrow and the FileIO raise many kinds
            raise ApplyError(f"cannot read {path}: {type(e).__name__}: {str(e).splitlines()[0] if str(e) else ''}") from None


def _footer(table: Table, path: str) -> pq.ParquetFile:
    return pq.ParquetFile(table.io.new_input(path).open())


class _Buffer:
    """Rows buffered until a row group is full (the writer makes a row group of every write)."""

    def __init__(self, limit_rows: int) -> None:
        self.limit_rows = limit_rows
        self.tables: list[pa.Table] = []
        self.rows = self.bytes = 0

    def add(self, t: pa.Table) -> pa.Table | None:
        self.tables.append(t)
        self.rows += t.num_rows
        self.bytes += t.get_total_buffer_size()
        return self.take() if self.rows >= self.limit_rows or self.bytes >= ROW_GROUP_BYTES else None

    def take(self) -> pa.Table | None:
        out = pa.concat_tables(self.tables) if self.tables else None
        self.tables, self.rows, self.bytes = [], 0, 0
        return out


def rewrite_bin(table: Table, state: IcebergState, paths: Sequence[str], names: OutputNames, *,
                move_to_current_spec: bool = False, removed_with: Sequence[str] = (),
                on_output: Callable[[str], None] | None = None) -> RewrittenBin:
    """Rewrite the bin of ``paths`` (live data files of ``state``, the state ``table`` was read at) into one
    new data file, verified; nothing is committed. Raises LocalEngineRefusal (support.py) for a bin the
    local engine cannot rewrite exactly, VerificationError when the output does not hold its inputs' rows.
    ``on_output(path)``: called with the output's path before the file is created (its folder follows the
    rows' partition): the caller's crash journal names it first."""
    from pyiceberg.io.fileformat import FileFormatFactory
    from pyiceberg.io.pyarrow import schema_to_pyarrow
    from pyiceberg.manifest import DataFile, DataFileContent, FileFormat
    from pyiceberg.schema import sanitize_column_names
    from pyiceberg.table import TableProperties
    from pyiceberg.typedef import Record
    from pyiceberg.utils.properties import property_as_int

    start = time.perf_counter()
    check_bin(state, paths, table.io, move_to_current_spec=move_to_current_spec, removed_with=removed_with)
    schema = table.schema()
    file_schema = sanitize_column_names(schema)
    target = schema_to_pyarrow(file_schema, include_field_ids=True)
    props = table.metadata.properties
    limit = min(ROW_GROUP_ROWS, property_as_int(props, TableProperties.PARQUET_ROW_GROUP_LIMIT,
                                                TableProperties.PARQUET_ROW_GROUP_LIMIT_DEFAULT) or ROW_GROUP_ROWS)
    by_path = {f.path: f for f in state.files}
    key: PartitionKey | None = None
    keyed = False
    buffer = _Buffer(limit)
    writer = None
    out_path: str | None = None
    rows_read: list[int] = []
    try:
        for path, rows in _read(table, state, paths, target):
            rows_read.append(rows.num_rows)
            if rows.num_rows == 0:
                continue
            k = _partition_key(table, rows)
            if keyed and (k.partition if k else None) != (key.partition if key else None):
                raise VerificationError(f"the rows of {path} fall in another partition of the current spec than the "
                                        "bin's other files")
            if not keyed:
                key, keyed = k, True
                out_path = table.location_provider().new_data_location(names.next(), key)
                if on_output is not None:
                    on_output(out_path)
                writer = FileFormatFactory.get(FileFormat.PARQUET).create_writer(
                    table.io.new_output(out_path), file_schema, props)
            full = buffer.add(rows.cast(target))
            if full is not None and writer is not None:
                writer.write(full)
        if writer is None:  # every row of the bin was deleted: nothing to write
            return RewrittenBin(tuple(paths), None, sum(by_path[p].record_count for p in paths),
                                sum(by_path[p].record_count for p in paths), 0, None, time.perf_counter() - start)
        rest = buffer.take()
        if rest is not None:
            writer.write(rest)
        stats = writer.close()
        assert out_path is not None
        facts = _verify(table, state, paths, rows_read, out_path, target)
        size = len(table.io.new_input(out_path))
        output = DataFile.from_args(
            content=DataFileContent.DATA, file_path=out_path, file_format=FileFormat.PARQUET,
            partition=key.partition if key is not None else Record(), file_size_in_bytes=size, sort_order_id=None,
            equality_ids=None, key_metadata=None, **stats.to_serialized_dict())
        output.spec_id = table.metadata.default_spec_id  # from_args drops spec_id (a property outside the struct)
    except BaseException:
        if writer is not None and out_path is not None:
            try:
                writer.close()
            except Exception:  # the write failed already; the file goes anyway
                pass
            discard(table, [out_path])
        raise
    rows_in = sum(by_path[p].record_count for p in paths)
    return RewrittenBin(tuple(paths), output, rows_in, rows_in - sum(rows_read), facts.rows, facts,
                        time.perf_counter() - start)


def verify_output(table: Table, state: IcebergState, paths: Sequence[str], rows_read: Sequence[int],
                  out_path: str) -> FooterFacts:
    """Verify a file another writer wrote for the bin of ``paths`` (the spark engine's rewrite) as this
    module verifies its own: ``rows_read`` per input, after its deletes."""
    from pyiceberg.io.pyarrow import schema_to_pyarrow
    from pyiceberg.schema import sanitize_column_names

    target = schema_to_pyarrow(sanitize_column_names(table.schema()), include_field_ids=True)
    return _verify(table, state, paths, rows_read, out_path, target, lineage=table.metadata.format_version >= 3)


#: the field ids of row lineage's columns (``_row_id``, ``_last_updated_sequence_number``): Iceberg's rewrite
#: of a v3 table writes them into the new file, so every row keeps its id
LINEAGE_FIELD_IDS = frozenset({"2147483540", "2147483539"})


def _lineage_fields(schema: pa.Schema) -> list[pa.Field]:
    return [f for f in schema if (f.metadata or {}).get(FIELD_ID, b"").decode() in LINEAGE_FIELD_IDS]


def _verify(table: Table, state: IcebergState, paths: Sequence[str], rows_read: Sequence[int], out_path: str,
            target: pa.Schema, *, lineage: bool = False) -> FooterFacts:
    """Verify the written file against its inputs (the module's docstring); its footer facts. ``lineage``:
    the output may carry row lineage's columns after the data columns (a v3 table's rewrite by Iceberg);
    they are not data, and the column check leaves them out."""
    schema = table.schema()
    by_path = {f.path: f for f in state.files}
    inputs = []
    dropped = []
    for path, read in zip(paths, rows_read):
        pf = _footer(table, path)
        md = pf.metadata
        if md.num_rows != by_path[path].record_count:
            raise VerificationError(f"{path} holds {md.num_rows} rows but its manifest entry says "
                                    f"{by_path[path].record_count}; nothing was committed")
        inputs.append(_as_table_names(md, pf.schema_arrow, schema))
        dropped.append(md.num_rows - read)
    out = _footer(table, out_path)
    written = out.schema_arrow
    extra = _lineage_fields(written) if lineage else []
    if extra:
        target = pa.schema([*target, *extra])
        written = pa.schema([f for f in written if f not in extra])
    try:
        check_written(out, target, out_path)
    except ValueError as e:
        raise VerificationError(f"{e}; nothing was committed") from None
    md = out.metadata
    if md.num_rows != sum(rows_read):
        raise VerificationError(f"{out_path} holds {md.num_rows} rows, but {sum(rows_read)} were read from its "
                                f"{len(paths)} input(s) after deletes; nothing was committed")
    problem = column_problem(inputs, md, written, dropped if any(dropped) else ())
    if problem:
        raise VerificationError(f"the rewrite of {len(paths)} file(s) into {out_path}: {problem}; nothing was "
                                "committed")
    return footer_facts(md, out.schema_arrow)


def discard(table: Table, paths: Iterable[str]) -> None:
    """Delete outputs that will not be committed (a missing one is fine), each proved unreferenced by the
    table's metadata first (references.py: the deletion gate)."""
    from compactor.formats.iceberg.references import delete_unreferenced

    delete_unreferenced(table, list(paths))
