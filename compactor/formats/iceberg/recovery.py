"""Crash recovery of an Iceberg table (runtime/journal.py): what a killed run's journal names and no snapshot
of the table references is deleted, every deletion through the table's deletion gate (references.py),
which reads the table's metadata again through its catalog. The journal names outputs relative to the
table's location; the gate judges them as the table's metadata names them (absolute)."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING

from compactor.formats.iceberg.references import IcebergReferences
from compactor.models.table import TableLocation
from compactor.runtime import journal
from compactor.runtime.deletion import DeletionGate
from compactor.runtime.paths import join
from compactor.runtime.storage import locate

if TYPE_CHECKING:
    from pyiceberg.table import Table


class RootGate:
    """The table's deletion gate with names relative to the table root ``root`` (the journal's names)."""

    def __init__(self, table: Table, root: str, storage_options: Mapping[str, str] | None = None) -> None:
        self._refs = IcebergReferences(table, storage_options)
        self._root, self._options = root, storage_options

    def _name(self, rel: str) -> str:
        return locate(join(self._root, rel), self._options)[1]

    def kept(self, files: Sequence[str], folders: Sequence[str] = ()) -> Mapping[str, str]:
        names = {f: self._name(f) for f in files}
        dirs = {f: self._name(f) for f in folders}
        kept = self._refs.kept(list(names.values()), list(dirs.values()))
        return {f: kept[n] for f, n in (*names.items(), *dirs.items()) if n in kept}


def relative(root: str, path: str, storage_options: Mapping[str, str] | None = None) -> str:
    """``path`` (as the table's metadata names it) relative to the table root ``root``; ValueError when it
    is not under it."""
    name, base = locate(path, storage_options)[1], locate(root, storage_options)[1].rstrip("/")
    if not name.startswith(base + "/"):
        raise ValueError(f"{path} is not under the table's location {root}")
    return name[len(base) + 1:]


def recover(location: TableLocation, grace_s: float) -> list[str]:
    """Delete what killed runs left (call while holding the table lease); the catalog is opened only when
    some journal entry is to be recovered."""
    from compactor.formats.iceberg.catalog import open_location

    def gate(_since: int | None) -> DeletionGate:
        table, _ = open_location(location)
        return RootGate(table, location.uri, location.storage_options)

    return journal.recover(location.uri, gate, grace_s=grace_s, storage_options=location.storage_options)
