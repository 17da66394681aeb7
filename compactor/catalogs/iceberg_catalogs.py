"""Iceberg catalogs (profiles.yml ``type: sql`` or ``type: rest``), read through pyiceberg (no JVM): the
tables of a namespace, each with its location, planned as Iceberg tables (the format reads and commits them
through the same catalog, by identifier). runtime/iceberg_catalog.py opens the catalog and loads a table,
for this module and the format alike.

Every failure is a CatalogError in one line naming the catalog, the table and the cause: a catalog that cannot
be opened (a database it cannot reach, a server that does not answer), a namespace or table it does not
hold."""

from __future__ import annotations

from typing import TYPE_CHECKING

from compactor.catalogs.base import by_provider, local_path
from compactor.models.catalog import CatalogSettings, CatalogTable
from compactor.runtime.iceberg_catalog import (
    IcebergCatalogError,
    cause,
    describe,
    load_table,
    open_catalog,
    settings_from,
)

if TYPE_CHECKING:
    from pyiceberg.catalog import Catalog as PyicebergCatalog

#: the provider a table of these catalogs is registered under (the registry maps it to its format)
PROVIDER = "iceberg"


class IcebergCatalog:
    """A ``sql`` or ``rest`` catalog of the target (its options are pyiceberg's catalog properties)."""

    def __init__(self, settings: CatalogSettings) -> None:
        self.name = settings.name
        self._settings = settings_from(settings)
        self._catalog: PyicebergCatalog | None = None

    def _open(self) -> PyicebergCatalog:
        if self._catalog is None:
            self._catalog = open_catalog(self._settings)
        return self._catalog

    def list_tables(self, namespace: str) -> list[CatalogTable]:
        catalog = self._open()
        try:
            names = catalog.list_tables(namespace)
        except Exception as e:  # noqa: BLE001 - pyiceberg and its drivers raise many kinds: one line
            raise IcebergCatalogError(f"{describe(self._settings)}: cannot list the tables of namespace "
                                      f"'{namespace}': {cause(e)}") from None
        return [self.get_table(namespace, ident[-1]) for ident in names]

    def get_table(self, namespace: str, name: str) -> CatalogTable:
        table = load_table(self._open(), self._settings, (*namespace.split("."), name))
        return by_provider(self.name, namespace, name, PROVIDER, local_path(table.location()),
                           kind="an Iceberg table")
