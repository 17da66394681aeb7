"""The Iceberg table a reference names, loaded through its catalog (pyiceberg, no JVM): the catalog the
target declares for the reference's identifier, opened by runtime/iceberg_catalog.py (the one module that
opens Iceberg catalogs, also for the catalogs layer). Every failure is one CatalogError line naming the
catalog, the table and the cause: ``IcebergCatalogError`` or ``IcebergTableNotFound``."""

from __future__ import annotations

from typing import TYPE_CHECKING

from compactor.models.table import TableLocation
from compactor.runtime.iceberg_catalog import (
    IcebergCatalogError,
    IcebergCatalogSettings,
    IcebergTableNotFound,
    load_table,
    open_catalog,
    settings_from,
)

if TYPE_CHECKING:
    from pyiceberg.table import Table


def open_table(settings: IcebergCatalogSettings, identifier: str | tuple[str, ...]) -> Table:
    """``load_table`` of a catalog opened for the call."""
    return load_table(open_catalog(settings), settings, identifier)


def open_location(table: TableLocation) -> tuple[Table, str]:
    """The pyiceberg table a reference names (its catalog identifier and that catalog's settings), with its
    name as messages show it (``namespace.table``). Raises IcebergCatalogError or IcebergTableNotFound."""
    ident = table.identifier
    if ident is None:
        raise IcebergTableNotFound(f"{table.uri}: an Iceberg table is read through its catalog, and this reference "
                                   "names none", hint="name it with `catalog: {name, namespace, table}` in its policy")
    if table.catalog is None:
        raise IcebergCatalogError(f"{ident}: catalog '{ident.catalog}' is not defined in the target",
                                  hint="declare it under the target's `catalogs:` in profiles.yml")
    settings = settings_from(table.catalog, table.storage_options)
    name = f"{ident.namespace}.{ident.table}"
    return open_table(settings, name), name
