"""The deletion gate of an Iceberg table (runtime/deletion.py): before compactor deletes one of the table's
files, it proves from the table's own metadata, read again at that moment, that nothing references it.

Kept: every file a manifest of any snapshot still in the table's metadata names (data and delete files,
whatever the entry's status: time travel to an older snapshot reads them), the manifests and manifest lists
themselves, statistics and partition statistics files, and everything under the table's ``metadata/``
folder. A folder is kept when it holds a kept file: a file any entry of a kept snapshot's manifest names
stays, a ``DELETED`` entry's too. What compactor deletes through it: outputs it wrote and never committed
(run.py, recovery.py), the files an expiry freed and orphan files (retention_run.py)."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING

from compactor.runtime.deletion import Deletion, delete_proved
from compactor.runtime.storage import locate

if TYPE_CHECKING:
    from pyiceberg.table import Table


def referenced_paths(table: Table) -> set[str]:
    """Every path the metadata of ``table`` (as loaded) references, as written there."""
    md, io = table.metadata, table.io
    out: set[str] = {table.metadata_location, *(e.metadata_file for e in md.metadata_log)}
    out.update(s.statistics_path for s in md.statistics)
    out.update(s.statistics_path for s in md.partition_statistics)
    seen: set[str] = set()
    for snapshot in md.snapshots:
        out.add(snapshot.manifest_list)
        for manifest in snapshot.manifests(io):
            if manifest.manifest_path in seen:
                continue
            seen.add(manifest.manifest_path)
            out.add(manifest.manifest_path)
            out.update(str(e.data_file.file_path) for e in manifest.fetch_manifest_entry(io, discard_deleted=False))
    return out


class IcebergReferences:
    """The DeletionGate of one Iceberg table; names are paths relative to the root of ``locate``'s storage
    (``/`` on local disk, the bucket on object stores)."""

    def __init__(self, table: Table, storage_options: Mapping[str, str] | None = None) -> None:
        self._table = table
        self._options = storage_options

    def _name(self, path: str) -> str:
        return locate(path, self._options)[1]

    def kept(self, files: Sequence[str], folders: Sequence[str] = ()) -> Mapping[str, str]:
        table = self._table.catalog.load_table(self._table.name())  # read again, the caller's table untouched
        refs = {self._name(p) for p in referenced_paths(table)}
        metadata = self._name(table.location().rstrip("/") + "/metadata") + "/"
        out: dict[str, str] = {}
        for f in files:
            if f in refs:
                out[f] = "a snapshot in the table's metadata references it"
            elif f.startswith(metadata):
                out[f] = "a file of the table's metadata folder"
        for folder in folders:
            prefix = folder.rstrip("/") + "/"
            if prefix.startswith(metadata) or metadata.startswith(prefix) or any(r.startswith(prefix) for r in refs):
                out[folder] = "the folder holds files the table references"
        return out


def delete_unreferenced(table: Table, paths: Sequence[str],
                        storage_options: Mapping[str, str] | None = None) -> Deletion:
    """Delete those of ``paths`` (as pyiceberg names them) that no snapshot of ``table`` references now."""
    if not paths:
        return Deletion()
    storage, _ = locate(paths[0], storage_options)
    gate = IcebergReferences(table, storage_options)
    names = [locate(p, storage_options)[1] for p in paths]
    present = [n for n in names if storage.exists(n)]
    done = delete_proved(storage, gate, present)
    if storage.kind == "local":  # Hadoop's local file system wrote a checksum beside each file Spark wrote
        checksums = [f"{folder}/.{base}.crc" if folder else f".{base}.crc"
                     for folder, _, base in (name.rpartition("/") for name in done.deleted)]
        delete_proved(storage, gate, [c for c in checksums if storage.exists(c)])
    return done
