"""The live files of one Iceberg snapshot, read from its manifests without a JVM, as pyiceberg objects: every
live data file with its data sequence number and the delete files that apply to it, and every live delete
file. state.py turns this into compactor's typed state; rewrite.py reads bins from it and replace.py
validates a commit against it.

One read of each manifest (in parallel): data entries, position deletes (matched to data files through
pyiceberg's DeleteFileIndex: by referenced file, else by partition, sequence number and path bounds, as
``scan().plan_files()`` matches them) and equality deletes (which pyiceberg's planner refuses to read: they
are matched here by the spec's rule, partition and sequence number, so a table that has them is still
planned, and its bins refused by name)."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from typing import TYPE_CHECKING

from compactor.errors import TableReadError
from compactor.runtime.gc_pause import gc_paused

if TYPE_CHECKING:
    from pyiceberg.io import FileIO
    from pyiceberg.manifest import DataFile, ManifestEntry, ManifestFile
    from pyiceberg.table import FileScanTask
    from pyiceberg.table.metadata import TableMetadata

#: manifests read at once (on object stores each is a request; locally the Avro decoder releases little)
MANIFEST_READERS = 8


@dataclass(frozen=True)
class LiveDataFile:
    """One live data file: pyiceberg's DataFile, its data sequence number, the delete files that apply."""

    file: DataFile
    #: the data sequence number (v1 tables: 0)
    sequence_number: int
    position_deletes: tuple[DataFile, ...]
    equality_deletes: tuple[DataFile, ...]

    @property
    def path(self) -> str:
        return str(self.file.file_path)

    @property
    def deletes(self) -> tuple[DataFile, ...]:
        return self.position_deletes + self.equality_deletes

    def scan_task(self) -> FileScanTask:
        """The file as pyiceberg's readers take it: with the position deletes that apply."""
        from pyiceberg.table import FileScanTask

        return FileScanTask(self.file, delete_files=set(self.position_deletes))


@dataclass(frozen=True)
class LiveFiles:
    """The live files of ``snapshot_id`` (None: a table without snapshots, no files)."""

    snapshot_id: int | None
    #: live data files by path, in manifest order
    data: Mapping[str, LiveDataFile]
    #: every live delete file by path (also those that apply to no live data file)
    deletes: Mapping[str, tuple[DataFile, int]]
    #: the manifests the snapshot's manifest list names, in its order
    manifests: tuple[ManifestFile, ...] = ()

    def delete_targets(self) -> dict[str, set[str]]:
        """Per live delete file, the live data files it applies to (by path)."""
        out: dict[str, set[str]] = {path: set() for path in self.deletes}
        for data in self.data.values():
            for d in data.deletes:
                out.setdefault(str(d.file_path), set()).add(data.path)
        return out


def _entries(io: FileIO, manifests: Sequence[ManifestFile]) -> list[list[ManifestEntry]]:
    if len(manifests) <= 1:
        return [m.fetch_manifest_entry(io, discard_deleted=True) for m in manifests]
    with ThreadPoolExecutor(max_workers=MANIFEST_READERS, thread_name_prefix="manifests") as pool:
        return list(pool.map(lambda m: m.fetch_manifest_entry(io, discard_deleted=True), manifests))


def _equality_applies(delete: DataFile, delete_seq: int, data: DataFile, data_seq: int) -> bool:
    """The spec's rule: an equality delete applies to data files with a smaller data sequence number, in its
    partition (same spec), or in every partition when its spec is unpartitioned."""
    if data_seq >= delete_seq:
        return False
    if not delete.partition or len(delete.partition) == 0:  # a global equality delete (unpartitioned spec)
        return True
    return bool(delete.spec_id == data.spec_id and delete.partition == data.partition)


def read_live(metadata: TableMetadata, io: FileIO, snapshot_id: int | None, where: str) -> LiveFiles:
    """The live files of ``snapshot_id`` of the table ``metadata`` describes (``where`` names the table in
    an error). Raises TableReadError when a manifest cannot be read. The cyclic collector is paused
    (runtime/gc_pause.py): a manifest entry is a dozen objects, none in a cycle, and each full collection
    walked every entry read so far (100,000 entries: 2.4 s read paused, 5.3 s not)."""
    with gc_paused():
        return _read_live(metadata, io, snapshot_id, where)


def _read_live(metadata: TableMetadata, io: FileIO, snapshot_id: int | None, where: str) -> LiveFiles:
    from pyiceberg.manifest import INITIAL_SEQUENCE_NUMBER, DataFileContent
    from pyiceberg.table.delete_file_index import DeleteFileIndex

    if snapshot_id is None:
        return LiveFiles(None, {}, {})
    snapshot = metadata.snapshot_by_id(snapshot_id)
    if snapshot is None:
        raise TableReadError(f"{where}: snapshot {snapshot_id} is not in the table's metadata (expired?)")
    try:
        manifests = snapshot.manifests(io)
        per_manifest = _entries(io, manifests)
    except Exception as e:  # pyiceberg's FileIO and Avro reader raise many kinds
        raise TableReadError(f"{where}: cannot read the manifests of snapshot {snapshot_id}: "
                             f"{type(e).__name__}: {str(e).splitlines()[0] if str(e) else ''}") from None
    data_entries: list[ManifestEntry] = []
    index = DeleteFileIndex()
    equality: list[tuple[DataFile, int]] = []
    deletes: dict[str, tuple[DataFile, int]] = {}
    for entries in per_manifest:
        for entry in entries:
            f = entry.data_file
            seq = entry.sequence_number if entry.sequence_number is not None else INITIAL_SEQUENCE_NUMBER
            if f.content == DataFileContent.DATA:
                data_entries.append(entry)
            elif f.content == DataFileContent.POSITION_DELETES:
                index.add_delete_file(entry, partition_key=f.partition)
                deletes[str(f.file_path)] = (f, seq)
            else:
                equality.append((f, seq))
                deletes[str(f.file_path)] = (f, seq)
    data: dict[str, LiveDataFile] = {}
    for entry in data_entries:
        f = entry.data_file
        seq = entry.sequence_number if entry.sequence_number is not None else INITIAL_SEQUENCE_NUMBER
        positions = index.for_data_file(seq, f, partition_key=f.partition)
        eq = tuple(d for d, dseq in equality if _equality_applies(d, dseq, f, seq))
        data[str(f.file_path)] = LiveDataFile(f, seq, tuple(sorted(positions, key=lambda d: str(d.file_path))), eq)
    return LiveFiles(snapshot_id, data, deletes, tuple(manifests))


def _referenced_paths(io: FileIO, delete: DataFile) -> set[str]:
    """The data files a position delete file names: its referenced file (v2 file-scoped deletes, deletion
    vectors), else its ``file_path`` bounds when they are one path, else the paths it holds (read)."""
    import pyarrow.parquet as pq

    referenced = getattr(delete, "referenced_data_file", None)
    if referenced:
        return {str(referenced)}
    lower, upper = (delete.lower_bounds or {}).get(PATH_FIELD_ID), (delete.upper_bounds or {}).get(PATH_FIELD_ID)
    if lower is not None and lower == upper:
        return {bytes(lower).decode("utf-8", "replace")}
    with io.new_input(str(delete.file_path)).open() as f:
        column = pq.read_table(f, columns=["file_path"]).column(0)
    return {str(p) for p in column.unique().to_pylist()}


#: the field id of a position delete file's ``file_path`` column (the Iceberg spec's reserved id)
PATH_FIELD_ID = 2147483546


def is_deletion_vector(delete: DataFile) -> bool:
    """A v3 deletion vector (a blob of a Puffin file): it deletes rows of exactly one data file, and the
    engine that removes that file removes it too (pyiceberg 0.12 reads no ``referenced_data_file``)."""
    from pyiceberg.manifest import FileFormat

    return bool(delete.file_format == FileFormat.PUFFIN)


def stranded_deletes(live: LiveFiles, io: FileIO, removed: set[str]) -> dict[str, tuple[str, ...]]:
    """The position delete files (deletion vectors aside: ``is_deletion_vector``) that apply to a file in
    ``removed`` and to no live data file outside it: removing those data files would leave them live with
    nothing to delete (pyiceberg cannot remove delete files).
    Per such delete file, the removed files it names. A delete file that the index matches to a kept file
    is read (or its bounds are) to be sure it names one."""
    out: dict[str, tuple[str, ...]] = {}
    seen: set[str] = set()
    for path in sorted(removed):
        data = live.data.get(path)
        if data is None:
            continue
        for d in data.position_deletes:
            key = str(d.file_path)
            if key in seen or is_deletion_vector(d):
                continue
            seen.add(key)
            names = _referenced_paths(io, d)
            kept = {p for p in names if p in live.data and p not in removed}
            if not kept:
                out[key] = tuple(sorted(p for p in names if p in removed))
    return out
