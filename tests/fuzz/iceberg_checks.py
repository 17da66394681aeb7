"""What the Iceberg fuzzer (tests/fuzz/iceberg_history.py) reads of its table, through pyiceberg alone (none of
compactor's readers): the rows of a snapshot as a multiset, every file the metadata references (each
snapshot's manifest list, its manifests and every entry of them, whatever its status) and which of those are
missing on disk, and the data files on disk. A failed check raises ``Failure`` naming what and where."""

from __future__ import annotations

from collections import Counter
from pathlib import Path
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from pyiceberg.table import Table

#: (id, p, val, note): note is None in the rows written before the column was added
Row = tuple[int, int, int, "str | None"]


class Failure(AssertionError):
    """A check of the history failed."""


def local(uri: str) -> Path:
    return Path(uri.removeprefix("file://"))


def plain(uri: str) -> str:
    """A path as the checks compare paths: the manifests' ``file://`` URIs and the orphan listing's local paths
    alike as local paths."""
    return local(uri).as_posix()


def rows_of(table: Table, snapshot_id: int | None = None) -> Counter[Row]:
    """The rows pyiceberg reads at ``snapshot_id`` (None: the current snapshot), as a multiset."""
    if snapshot_id is None and table.current_snapshot() is None:
        return Counter()
    data = table.scan(snapshot_id=snapshot_id).to_arrow().to_pylist()
    return Counter((r["id"], r["p"], r["val"], r.get("note")) for r in data)


def live_files(table: Table) -> set[str]:
    """The data files of the current snapshot (as local paths)."""
    if table.current_snapshot() is None:
        return set()
    return {plain(str(t.file.file_path)) for t in table.scan().plan_files()}


class References:
    """Every file the metadata of a table references, by any snapshot still in it (as local paths);
    manifests are read once (they never change once written)."""

    def __init__(self) -> None:
        self._entries: dict[str, tuple[str, ...]] = {}

    def of(self, table: Table) -> set[str]:
        md, io = table.metadata, table.io
        out: set[str] = {table.metadata_location}
        for snapshot in md.snapshots:
            out.add(snapshot.manifest_list)
            for manifest in snapshot.manifests(io):
                out.add(manifest.manifest_path)
                if manifest.manifest_path not in self._entries:
                    self._entries[manifest.manifest_path] = tuple(
                        str(e.data_file.file_path) for e in manifest.fetch_manifest_entry(io, discard_deleted=False))
                out.update(self._entries[manifest.manifest_path])
        return {plain(p) for p in out}

    def missing(self, table: Table) -> list[str]:
        """The referenced files that are not on disk, sorted."""
        return sorted(p for p in self.of(table) if not Path(p).exists())


def data_on_disk(table: Table) -> set[str]:
    """Every parquet file under the table's location outside hidden folders (compactor's state)."""
    root = local(table.location())
    return {p.as_posix() for p in root.rglob("*.parquet")
            if not any(part.startswith(("_", ".")) for part in p.relative_to(root).parts)}


def journal_entries(table: Table) -> list[str]:
    return sorted(p.name for p in (local(table.location()) / "_compactor" / "journal").glob("*.json"))
