"""An Iceberg table's state, read without a JVM (live.py reads the manifests once): the current snapshot,
format version, schema, partition specs (the default and every older one), sort order; per live data file
its path, size, record count, partition (rendered per its spec with the spec's transforms), spec id, file
format and the delete files that apply to it; and the totals. Typed data only: what the planner and the
checks read; pyiceberg's own objects stay in LiveFiles."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Literal

from compactor.formats.iceberg.live import PATH_FIELD_ID, LiveDataFile, LiveFiles, read_live

if TYPE_CHECKING:
    from pyiceberg.manifest import DataFile, ManifestFile
    from pyiceberg.partitioning import PartitionSpec
    from pyiceberg.schema import Schema
    from pyiceberg.table import Table
    from pyiceberg.table.metadata import TableMetadata

    from compactor.formats.iceberg.retention_facts import RetentionFacts

DeleteKind = Literal["position", "deletion_vector", "equality"]


@dataclass(frozen=True)
class Column:
    """A top-level column of the schema (nested types are rendered in ``type``)."""

    field_id: int
    name: str
    type: str
    required: bool


@dataclass(frozen=True)
class PartitionField:
    """One field of a partition spec: ``transform`` of the source column."""

    field_id: int
    name: str
    source_id: int
    #: the source column's current name (None: the column was dropped)
    source: str | None
    #: pyiceberg's rendering: identity, day, bucket[16], truncate[4], void, ...
    transform: str


@dataclass(frozen=True)
class Spec:
    spec_id: int
    fields: tuple[PartitionField, ...]

    @property
    def unpartitioned(self) -> bool:
        return not self.fields


@dataclass(frozen=True)
class SortField:
    source_id: int
    source: str | None
    transform: str
    direction: str
    null_order: str


@dataclass(frozen=True)
class SortOrder:
    order_id: int
    fields: tuple[SortField, ...]


@dataclass(frozen=True)
class PartitionValue:
    """One field of a file's partition tuple: its raw value (as the manifest stores it: days since the
    epoch for ``day``, the bucket number, ...) and its text as the spec's transform renders it."""

    name: str
    value: object
    text: str


@dataclass(frozen=True)
class IcebergDeleteFile:
    path: str
    kind: DeleteKind
    size: int
    record_count: int
    file_format: str
    spec_id: int
    sequence_number: int
    #: it deletes rows of one data file only (a deletion vector, or position deletes whose ``file_path``
    #: bounds are one path): its record count is rows deleted from that file (Iceberg's
    #: ContentFileUtil.isFileScoped, which its rewrite's delete ratio counts)
    file_scoped: bool = False
    #: its partition in its spec (as a data file's)
    partition: tuple[PartitionValue, ...] = ()

    @property
    def partition_key(self) -> tuple[int, tuple[object, ...]]:
        """(spec id, raw values), as ``IcebergDataFile.partition_key``."""
        return self.spec_id, tuple(v.value for v in self.partition)


@dataclass(frozen=True)
class IcebergManifest:
    """One manifest the snapshot's manifest list names."""

    path: str
    #: ``data`` or ``deletes``
    content: str
    spec_id: int
    #: its size in bytes
    length: int
    #: its entries that are live in the snapshot (added and existing files)
    live_files: int


@dataclass(frozen=True)
class IcebergDataFile:
    """One live data file."""

    path: str
    size: int
    record_count: int
    spec_id: int
    partition: tuple[PartitionValue, ...]
    file_format: str
    sequence_number: int
    deletes: tuple[IcebergDeleteFile, ...] = ()

    @property
    def partition_path(self) -> str:
        """``d_day=2024-01-01/b=3``, as Iceberg's Hive-style folders name it ('' when unpartitioned)."""
        return "/".join(f"{v.name}={v.text}" for v in self.partition)

    @property
    def partition_key(self) -> tuple[int, tuple[object, ...]]:
        """(spec id, raw values): the files of one partition of one spec share it."""
        return self.spec_id, tuple(v.value for v in self.partition)

    @property
    def deleted_rows_at_most(self) -> int:
        """Rows its position deletes may remove: their record counts (a delete file may also name other
        files' rows, so this bounds the rows deleted from this file)."""
        return sum(d.record_count for d in self.deletes if d.kind != "equality")

    @property
    def deleted_rows_known(self) -> int:
        """Rows its file-scoped deletes remove (at most its rows), as Iceberg's rewrite counts them for
        ``delete-ratio-threshold``: other delete files may remove more."""
        counted = {d.path: d.record_count for d in self.deletes if d.file_scoped}
        return min(self.record_count, sum(counted.values()))

    @property
    def has_equality_deletes(self) -> bool:
        return any(d.kind == "equality" for d in self.deletes)


@dataclass(frozen=True)
class Totals:
    data_files: int
    data_bytes: int
    records: int
    position_delete_files: int
    equality_delete_files: int
    delete_records: int
    delete_bytes: int
    #: live delete files that apply to no live data file (left by rewrites that could not remove them)
    dangling_delete_files: int


@dataclass(frozen=True)
class IcebergState:
    """An Iceberg table at one snapshot."""

    identifier: str
    location: str
    format_version: int
    #: None: the table has no snapshot yet (and no files)
    snapshot_id: int | None
    sequence_number: int | None
    timestamp_ms: int | None
    schema_id: int
    columns: tuple[Column, ...]
    default_spec_id: int
    specs: tuple[Spec, ...]
    sort_order: SortOrder
    properties: Mapping[str, str]
    files: tuple[IcebergDataFile, ...]
    delete_files: tuple[IcebergDeleteFile, ...]
    totals: Totals
    #: the pyiceberg objects the state was built from (rewrite and replace read them)
    live: LiveFiles = field(repr=False, compare=False)
    #: what the policy's retention is planned from, when it plans any (retention_read.py)
    retention: RetentionFacts | None = field(default=None, repr=False, compare=False)
    #: the table's metadata at the read (its schema and every partition spec, as pyiceberg's objects: the
    #: planner projects a where on source columns through them)
    metadata: TableMetadata | None = field(default=None, repr=False, compare=False)
    #: the manifests of the snapshot, in its manifest list's order
    manifests: tuple[IcebergManifest, ...] = ()

    def spec(self, spec_id: int) -> Spec:
        return next(s for s in self.specs if s.spec_id == spec_id)

    def file(self, path: str) -> IcebergDataFile:
        return next(f for f in self.files if f.path == path)


def _spec(spec: PartitionSpec, schema: Schema) -> Spec:
    return Spec(spec.spec_id, tuple(
        PartitionField(f.field_id, f.name, f.source_id, schema.find_column_name(f.source_id), str(f.transform))
        for f in spec.fields))


def _sort_order(metadata: TableMetadata, schema: Schema) -> SortOrder:
    order = metadata.sort_order()
    return SortOrder(order.order_id, tuple(
        SortField(f.source_id, schema.find_column_name(f.source_id), str(f.transform), f.direction.value,
                  f.null_order.value) for f in order.fields))


def _kind(f: DataFile) -> DeleteKind:
    from pyiceberg.manifest import DataFileContent, FileFormat

    if f.content == DataFileContent.EQUALITY_DELETES:
        return "equality"
    return "deletion_vector" if f.file_format == FileFormat.PUFFIN else "position"


def _delete(f: DataFile, seq: int, render: _Renderer) -> IcebergDeleteFile:
    kind = _kind(f)
    return IcebergDeleteFile(str(f.file_path), kind, int(f.file_size_in_bytes), int(f.record_count),
                             str(f.file_format.value), int(f.spec_id or 0), seq, _file_scoped(f, kind), render(f))


def _file_scoped(f: DataFile, kind: DeleteKind) -> bool:
    if kind == "deletion_vector":
        return True
    if kind != "position":
        return False
    lower, upper = (f.lower_bounds or {}).get(PATH_FIELD_ID), (f.upper_bounds or {}).get(PATH_FIELD_ID)
    return lower is not None and lower == upper


def _manifest(m: ManifestFile) -> IcebergManifest:
    from pyiceberg.manifest import ManifestContent

    return IcebergManifest(str(m.manifest_path), "deletes" if m.content == ManifestContent.DELETES else "data",
                           int(m.partition_spec_id), int(m.manifest_length),
                           int(m.added_files_count or 0) + int(m.existing_files_count or 0))


class _Renderer:
    """Partition tuples rendered per spec, each spec's partition type built once, and each partition's tuple
    once: the files of one partition share it (a table has far fewer partitions than files)."""

    def __init__(self, metadata: TableMetadata) -> None:
        self.schema = metadata.schema()
        self.specs = metadata.specs()
        self._types: dict[int, list[object]] = {}
        self._seen: dict[tuple[int, tuple[object, ...]], tuple[PartitionValue, ...]] = {}

    def __call__(self, f: DataFile) -> tuple[PartitionValue, ...]:
        spec_id = int(f.spec_id or 0)
        spec = self.specs[spec_id]
        if not spec.fields:
            return ()
        values = tuple(f.partition[i] for i in range(len(spec.fields)))
        # equal values render alike, floats aside (0.0 == -0.0, and NaN is unequal to itself): never shared
        key = None if any(isinstance(v, float) for v in values) else (spec_id, values)
        if key is not None and (known := self._seen.get(key)) is not None:
            return known
        types = self._types.get(spec_id)
        if types is None:
            types = self._types[spec_id] = [t.field_type for t in spec.partition_type(self.schema).fields]
        out = tuple(PartitionValue(pf.name, value, pf.transform.to_human_string(types[i], value))  # type: ignore[arg-type]
                    for i, (pf, value) in enumerate(zip(spec.fields, values, strict=True)))
        if key is not None:
            self._seen[key] = out
        return out


def _data_file(live: LiveDataFile, render: _Renderer, seqs: Mapping[str, int]) -> IcebergDataFile:
    f = live.file
    return IcebergDataFile(str(f.file_path), int(f.file_size_in_bytes), int(f.record_count), int(f.spec_id or 0),
                     render(f), str(f.file_format.value), live.sequence_number,
                     tuple(_delete(d, seqs[str(d.file_path)], render) for d in live.deletes))


def state_of(table: Table, identifier: str, snapshot_id: int | None = None) -> IcebergState:
    """The state of ``table`` at ``snapshot_id`` (None: its current snapshot); ``identifier`` names it."""
    md = table.metadata
    snap = md.snapshot_by_id(snapshot_id) if snapshot_id is not None else md.current_snapshot()
    sid = snap.snapshot_id if snap is not None else None
    live = read_live(md, table.io, sid, identifier)
    schema = md.schema()
    render = _Renderer(md)
    seqs = {path: seq for path, (_, seq) in live.deletes.items()}
    files = tuple(_data_file(f, render, seqs) for f in live.data.values())
    deletes = tuple(_delete(f, seq, render) for f, seq in live.deletes.values())
    targets = live.delete_targets()
    totals = Totals(
        data_files=len(files), data_bytes=sum(f.size for f in files), records=sum(f.record_count for f in files),
        position_delete_files=sum(1 for d in deletes if d.kind != "equality"),
        equality_delete_files=sum(1 for d in deletes if d.kind == "equality"),
        delete_records=sum(d.record_count for d in deletes), delete_bytes=sum(d.size for d in deletes),
        dangling_delete_files=sum(1 for path in live.deletes if not targets.get(path)))
    return IcebergState(
        identifier=identifier, location=md.location, format_version=int(md.format_version), snapshot_id=sid,
        sequence_number=snap.sequence_number if snap is not None else None,
        timestamp_ms=snap.timestamp_ms if snap is not None else None,
        schema_id=schema.schema_id,
        columns=tuple(Column(f.field_id, f.name, str(f.field_type), f.required) for f in schema.fields),
        default_spec_id=md.default_spec_id, specs=tuple(_spec(s, schema) for s in md.partition_specs),
        sort_order=_sort_order(md, schema), properties=dict(md.properties), files=files, delete_files=deletes,
        totals=totals, manifests=tuple(_manifest(m) for m in live.manifests), live=live, metadata=md)
