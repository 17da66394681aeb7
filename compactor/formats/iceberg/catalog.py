"""The Iceberg table a reference names, loaded through its catalog (pyiceberg, no JVM): the catalog the
target declares for the reference's identifier, opened by runtime/iceberg_catalog.py (the one module that
opens Iceberg catalogs, also for the catalogs layer). Every failure is one CatalogError line naming the
catalog, the table and the cause: ``IcebergCatalogError`` or ``IcebergTableNotFound``. A table a policy names
by path (a Hadoop table, or any table's location) is read from its newest metadata file, for planning only:
nothing commits to it without its catalog (``static_table``)."""

from __future__ import annotations

import re
from typing import TYPE_CHECKING

from compactor.models.table import TableLocation
from compactor.runtime.iceberg_catalog import (
    IcebergCatalogError,
    IcebergCatalogSettings,
    IcebergTableNotFound,
    cause,
    fileio_properties,
    load_table,
    open_catalog,
    settings_from,
)
from compactor.runtime.storage import StorageError, storage_for

if TYPE_CHECKING:
    from pyiceberg.table import Table


#: the name of a Hadoop table's pointer to its current metadata file (``v<N>.metadata.json``)
VERSION_HINT = "version-hint.text"
_NUMBERED = re.compile(r"^v?(\d+)[-.].*metadata\.json(\.gz)?$")


def newest_metadata(table: TableLocation) -> str:
    """The URI of the newest metadata file under ``table``'s ``metadata/`` folder: the one a Hadoop table's
    ``version-hint.text`` names, else the highest-numbered ``<N>-<uuid>.metadata.json`` or ``v<N>.metadata.json``
    (the number each catalog writes in sequence). Raises IcebergTableNotFound."""
    root = table.uri.rstrip("/")
    storage = storage_for(f"{root}/metadata", table.storage_options)
    try:
        if storage.exists(VERSION_HINT):
            hint = storage.read_bytes(VERSION_HINT).decode("utf-8", "replace").strip()
            if hint.isdigit() and storage.exists(f"v{hint}.metadata.json"):
                return f"{root}/metadata/v{hint}.metadata.json"
        numbered = [(int(m.group(1)), o.path) for o in storage.list() if (m := _NUMBERED.match(o.path.rsplit("/", 1)[-1]))]
    except StorageError as e:
        raise IcebergTableNotFound(f"{table.uri}: its metadata folder cannot be read: {e.message}") from None
    if not numbered:
        raise IcebergTableNotFound(f"{table.uri}: no Iceberg metadata file (*.metadata.json) in its metadata/ folder",
                                   hint="give the table's location, or name it with `catalog: {name, namespace, table}`")
    return f"{root}/metadata/{max(numbered)[1]}"


def static_table(table: TableLocation) -> Table:
    """The table at ``table``'s location as its newest metadata file describes it (pyiceberg's StaticTable:
    planning reads it; nothing commits to it)."""
    from pyiceberg.table import StaticTable

    where = newest_metadata(table)
    try:
        return StaticTable.from_metadata(where, fileio_properties(table.storage_options))
    except Exception as e:  # noqa: BLE001 - pyiceberg and the FileIO raise many kinds
        raise IcebergTableNotFound(f"{table.uri}: cannot read {where}: {cause(e)}") from None


def open_table(settings: IcebergCatalogSettings, identifier: str | tuple[str, ...]) -> Table:
    """``load_table`` of a catalog opened for the call."""
    return load_table(open_catalog(settings), settings, identifier)


def open_location(table: TableLocation) -> tuple[Table, str]:
    """The pyiceberg table a reference names (its catalog identifier and that catalog's settings), with its
    name as messages show it (``namespace.table``). Raises IcebergCatalogError or IcebergTableNotFound."""
    ident = table.identifier
    if ident is None:  # a policy's `path`: the table's newest metadata file, read-only
        return static_table(table), table.uri
    if table.catalog is None:
        raise IcebergCatalogError(f"{ident}: catalog '{ident.catalog}' is not defined in the target",
                                  hint="declare it under the target's `catalogs:` in profiles.yml")
    settings = settings_from(table.catalog, table.storage_options)
    name = f"{ident.namespace}.{ident.table}"
    return open_table(settings, name), name
