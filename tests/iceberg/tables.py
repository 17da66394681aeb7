"""Iceberg tables written by pyiceberg at test time, in a SqlCatalog on sqlite under tmp_path: one builder per
kind (unpartitioned; identity by int and by string; day; bucket; two specs after partition evolution; schema
evolution with a column added and one renamed), every one with nulls, decimals, dates and timestamps with
and without zone. Also the delete files pyiceberg cannot write (position and equality deletes, committed
here through its private snapshot producer: test set-up only), an upgrade to format version 3, and the
helpers the tests share (rows as a sorted multiset, bins by partition)."""

from __future__ import annotations

import datetime as dt
import uuid
from collections.abc import Iterable, Sequence
from decimal import Decimal
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

pytest.importorskip("pyiceberg", reason="pyiceberg is not installed (pip install 'compactor[iceberg]')")
pytest.importorskip("pyiceberg_core", reason="pyiceberg-core is not installed: pyiceberg cannot write bucket/day "
                                             "partitions without it (pip install 'compactor[iceberg]')")

from pyiceberg.catalog import Catalog  # noqa: E402
from pyiceberg.catalog.sql import SqlCatalog  # noqa: E402
from pyiceberg.manifest import (  # noqa: E402
    DataFile,
    DataFileContent,
    FileFormat,
    ManifestContent,
    ManifestEntry,
    ManifestEntryStatus,
    ManifestFile,
    ManifestWriterV2,
)
from pyiceberg.partitioning import PartitionField, PartitionSpec  # noqa: E402
from pyiceberg.schema import Schema  # noqa: E402
from pyiceberg.table import Table  # noqa: E402
from pyiceberg.table.snapshots import Operation  # noqa: E402
from pyiceberg.table.update.snapshot import _FastAppendFiles  # noqa: E402
from pyiceberg.transforms import BucketTransform, DayTransform, IdentityTransform  # noqa: E402
from pyiceberg.types import (  # noqa: E402
    DateType,
    DecimalType,
    IntegerType,
    LongType,
    NestedField,
    StringType,
    TimestampType,
    TimestamptzType,
)

from compactor.runtime.iceberg_catalog import SqlCatalogSettings  # noqa: E402

SCHEMA = Schema(
    NestedField(1, "id", LongType()), NestedField(2, "grp", IntegerType()), NestedField(3, "cat", StringType()),
    NestedField(4, "amount", DecimalType(10, 2)), NestedField(5, "ts", TimestampType()),
    NestedField(6, "tstz", TimestamptzType()), NestedField(7, "day", DateType()),
)
KINDS = ("unpartitioned", "identity_int", "identity_string", "day", "bucket", "two_specs", "schema_evolution")
APPENDS = 4
ROWS = 10


def settings(tmp_path: Path, name: str = "cat") -> SqlCatalogSettings:
    (tmp_path / "warehouse").mkdir(exist_ok=True)
    return SqlCatalogSettings(name, f"sqlite:///{tmp_path}/catalog.db", f"file://{tmp_path}/warehouse")


def catalog(tmp_path: Path) -> SqlCatalog:
    s = settings(tmp_path)
    cat = SqlCatalog(s.name, uri=s.uri, warehouse=s.warehouse or "")
    cat.create_namespace_if_not_exists("db")
    return cat


def batch(table: Table, i: int, rows: int = ROWS) -> pa.Table:
    """Append ``i``'s rows: ids i*rows.., two groups, three categories (one null), nulls in amount and tstz."""
    ids = list(range(i * rows, i * rows + rows))
    data: dict[str, list[Any]] = {
        "id": ids, "grp": [k % 2 for k in ids], "cat": [(None, "x", "y")[k % 3] for k in ids],
        "amount": [None if k % 4 == 0 else Decimal(k) / 4 for k in ids],
        "ts": [dt.datetime(2024, 1, 1 + k % 2, k % 24, 30, 0, 123456) for k in ids],
        "tstz": [None if k % 5 == 0 else dt.datetime(2024, 2, 1, 1, k % 60, tzinfo=dt.UTC) for k in ids],
        "day": [dt.date(2024, 3, 1) + dt.timedelta(days=k % 3) for k in ids],
    }
    arrow = table.schema().as_arrow()
    data["amount"] = [None if v is None else v.quantize(Decimal("0.01")) for v in data["amount"]]
    data["label"] = data["cat"]  # the name cat has after the rename
    data["extra"] = [f"e{k}" if k % 2 else None for k in ids]  # the column schema evolution adds
    return pa.table({f.name: data[f.name] for f in arrow}, schema=arrow)


def append(table: Table, i: int, rows: int = ROWS) -> None:
    table.append(batch(table, i, rows))


def _spec(kind: str) -> PartitionSpec:
    one: dict[str, PartitionField] = {
        "identity_int": PartitionField(2, 1000, IdentityTransform(), "grp"),
        "identity_string": PartitionField(3, 1000, IdentityTransform(), "cat"),
        "day": PartitionField(5, 1000, DayTransform(), "ts_day"),
        "bucket": PartitionField(1, 1000, BucketTransform(4), "id_bucket"),
        "two_specs": PartitionField(2, 1000, IdentityTransform(), "grp"),
    }
    return PartitionSpec(one[kind]) if kind in one else PartitionSpec()


def make_table(tmp_path: Path, kind: str, name: str | None = None, version: int = 2) -> Table:
    """A table of ``kind`` with APPENDS appends of ROWS rows (and its evolution halfway)."""
    return write_table(catalog(tmp_path), f"db.{name or kind}", kind, version)


def write_table(cat: Catalog, identifier: str, kind: str, version: int = 2) -> Table:
    """A table of ``kind`` created in ``cat`` (any pyiceberg catalog) as ``identifier``, with APPENDS appends
    of ROWS rows (and its evolution halfway)."""
    t = cat.create_table(identifier, schema=SCHEMA, partition_spec=_spec(kind),
                         properties={"format-version": str(version)})
    for i in range(APPENDS):
        if i == APPENDS // 2 and kind == "two_specs":
            with t.update_spec() as u:
                u.add_field("ts", DayTransform(), "ts_day")
        if i == APPENDS // 2 and kind == "schema_evolution":
            with t.update_schema() as u:
                u.add_column("extra", StringType())
            with t.update_schema() as u:
                u.rename_column("cat", "label")
        append(t, i)
    return t


def rows(table: Table, snapshot_id: int | None = None) -> list[tuple[Any, ...]]:
    """The table's rows as a sorted multiset (tuples in column order)."""
    data = table.scan(snapshot_id=snapshot_id).to_arrow()
    return sorted((tuple(r.values()) for r in data.to_pylist()), key=repr)


def operations_since(table: Table, snapshot_id: int) -> list[str]:
    """The operations of the snapshots committed after ``snapshot_id`` in the current history, oldest first."""
    from pyiceberg.table.snapshots import ancestors_of

    ops = []
    for snap in ancestors_of(table.current_snapshot(), table.metadata):
        if snap.snapshot_id == snapshot_id:
            return list(reversed(ops))
        ops.append(snap.summary.operation.value if snap.summary is not None else "?")
    raise AssertionError(f"snapshot {snapshot_id} is not an ancestor of the current one")


def _local(uri: str) -> str:
    """The local path of a ``file:`` URI (``file:/x`` as Hadoop writes it, ``file:///x`` as pyiceberg does)."""
    return uri.removeprefix("file:").removeprefix("//")


def leftovers(table: Table) -> list[str]:
    """Parquet files under the table (on local disk) no snapshot references (orphans), and the journal
    entries left in its ``_compactor/journal``."""
    from compactor.formats.iceberg.references import referenced_paths

    root = Path(_local(table.location()))
    refs = {_local(p) for p in referenced_paths(table)}
    orphans = [p.as_posix() for p in root.rglob("*.parquet") if p.as_posix() not in refs]
    return orphans + [p.name for p in (root / "_compactor" / "journal").glob("*.json")]


def bins_by_partition(files: Iterable[Any], min_files: int = 2) -> list[list[str]]:
    """The paths of each (spec, partition) with at least ``min_files`` files: one bin each."""
    groups: dict[Any, list[str]] = {}
    for f in files:
        groups.setdefault(f.partition_key, []).append(f.path)
    return [paths for paths in groups.values() if len(paths) >= min_files]


# --- what pyiceberg cannot write: delete files (test set-up through its private producer)

PATH_ID, POS_ID = 2147483546, 2147483545


class _DeleteManifestWriter(ManifestWriterV2):
    def content(self) -> ManifestContent:
        return ManifestContent.DELETES

    @property
    def _meta(self) -> dict[str, str]:
        return {**super()._meta, "content": "deletes"}


class _AddDeletes(_FastAppendFiles):
    """A snapshot that adds delete files only (as a Spark merge-on-read DELETE does)."""

    def __init__(self, table: Table, files: Sequence[DataFile]) -> None:
        super().__init__(Operation.DELETE, table.transaction(), table.io)
        self._delete_files = list(files)

    def _manifests(self) -> list[ManifestFile]:
        out = super()._manifests()
        for spec_id in sorted({f.spec_id for f in self._delete_files}):
            writer = _DeleteManifestWriter(self.spec(spec_id), self.schema(), self.new_manifest_output(),
                                           self._snapshot_id, self._compression)
            with writer:
                for f in self._delete_files:
                    if f.spec_id == spec_id:
                        writer.add(ManifestEntry.from_args(status=ManifestEntryStatus.ADDED,
                                                           snapshot_id=self._snapshot_id, data_file=f))
            out.append(writer.to_manifest_file())
        return out


def _delete_file(table: Table, content: DataFileContent, data: pa.Table, like: DataFile, *,
                 bounds: bytes | None = None, equality_ids: list[int] | None = None) -> DataFile:
    path = f"{table.location()}/data/deletes-{content.name.lower()}-{uuid.uuid4()}.parquet"
    with table.io.new_output(path).create(overwrite=True) as out:
        pq.write_table(data, out)
    f = DataFile.from_args(
        content=content, file_path=path, file_format=FileFormat.PARQUET, partition=like.partition,
        record_count=len(data), file_size_in_bytes=len(table.io.new_input(path)),
        lower_bounds={PATH_ID: bounds} if bounds else None, upper_bounds={PATH_ID: bounds} if bounds else None,
        equality_ids=equality_ids, sort_order_id=None, key_metadata=None)
    f.spec_id = like.spec_id
    return f


def _data_file(table: Table, path: str) -> DataFile:
    return next(t.file for t in table.scan().plan_files() if t.file.file_path == path)


def commit_position_deletes(table: Table, positions: dict[str, list[int]], *, file_scoped: bool = False) -> list[str]:
    """Commit position deletes of ``positions`` (data file path -> row positions): one delete file for all
    (partition-scoped: every path must be in one partition), or one per data file with its path as bounds
    (file-scoped, as Spark 1.12 writes them). Returns the delete files' paths."""
    schema = pa.schema([pa.field("file_path", pa.string(), nullable=False, metadata={b"PARQUET:field_id": str(PATH_ID)}),
                        pa.field("pos", pa.int64(), nullable=False, metadata={b"PARQUET:field_id": str(POS_ID)})])
    groups = [{p: v} for p, v in positions.items()] if file_scoped else [positions]
    files = []
    for group in groups:
        pairs = sorted((p, n) for p, ns in group.items() for n in ns)
        data = pa.table({"file_path": [p for p, _ in pairs], "pos": [n for _, n in pairs]}, schema=schema)
        first = next(iter(group))
        files.append(_delete_file(table, DataFileContent.POSITION_DELETES, data, _data_file(table, first),
                                  bounds=first.encode() if file_scoped else None))
    _commit_deletes(table, files)
    return [f.file_path for f in files]


def commit_equality_delete(table: Table, like_path: str, ids: list[int]) -> str:
    """Commit an equality delete of ``ids`` (column ``id``) in the partition of ``like_path``."""
    schema = pa.schema([pa.field("id", pa.int64(), metadata={b"PARQUET:field_id": b"1"})])
    f = _delete_file(table, DataFileContent.EQUALITY_DELETES, pa.table({"id": ids}, schema=schema),
                     _data_file(table, like_path), equality_ids=[1])
    _commit_deletes(table, [f])
    return f.file_path


def _commit_deletes(table: Table, files: list[DataFile]) -> None:
    producer = _AddDeletes(table, files)
    producer.commit()
    producer._transaction.commit_transaction()


def upgrade_to_v3(tmp_path: Path, table: Table) -> Table:
    """The table as a format-version 3 table (registered as ``<name>_v3`` in its catalog): pyiceberg cannot
    upgrade a table, so its metadata file is copied with the version (and v3's row lineage counter) set, as
    Spark's ``ALTER TABLE ... SET TBLPROPERTIES ('format-version'='3')`` leaves it."""
    import json

    meta = json.loads(table.io.new_input(table.metadata_location).open().read())
    meta["format-version"] = 3
    meta.setdefault("next-row-id", 0)
    path = table.metadata_location.replace(".metadata.json", "-v3.metadata.json")
    with table.io.new_output(path).create(overwrite=True) as out:
        out.write(json.dumps(meta).encode())
    return catalog(tmp_path).register_table(f"{'.'.join(table.name()[-2:])}_v3", path)


def overwrite_file(table: Table, path: str) -> None:
    """Another writer's overwrite of one data file: its rows kept, in a new file."""
    from pyiceberg.expressions import AlwaysTrue
    from pyiceberg.io.pyarrow import ArrowScan, _dataframe_to_data_files

    mine = next(t for t in table.scan().plan_files() if t.file.file_path == path)
    data = ArrowScan(table.metadata, table.io, table.schema(), AlwaysTrue()).to_table([mine])
    with table.transaction() as tx:
        ow = tx.update_snapshot().overwrite()
        ow.delete_data_file(mine.file)
        for f in _dataframe_to_data_files(tx.table_metadata, data, table.io):
            ow.append_data_file(f)
        ow.commit()
