"""Iceberg catalogs read through pyiceberg (no JVM): the Iceberg tables of a namespace, each with its location,
planned as Iceberg tables (the format reads and commits them through the same catalog, by identifier).
runtime/iceberg_catalog.py opens the catalog and loads a table, for this module and the format alike.
A ``sql`` or ``rest`` catalog is always read here; a ``glue`` or ``hive`` one when the tables wanted are
Iceberg's (a policy of the Iceberg format: pyiceberg lists only Iceberg tables, and a Hive metastore is
asked over thrift instead of through a Spark session).

Every failure is a CatalogError in one line naming the catalog, the table and the cause: a catalog that cannot
be opened (a database it cannot reach, a server that does not answer), a namespace or table it does not
hold."""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING

from compactor.catalogs.base import by_provider, local_path
from compactor.models.catalog import CatalogSettings, CatalogTable
from compactor.runtime.iceberg_catalog import (
    ICEBERG_CATALOG_TYPES,
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
#: the catalog types pyiceberg opens (sql and rest hold Iceberg tables only; glue and hive hold others too)
PYICEBERG_TYPES = ICEBERG_CATALOG_TYPES


class IcebergCatalog:
    """A catalog of the target as pyiceberg reads it; ``storage_options``: the target's (the S3 FileIO
    properties of the tables' files)."""

    def __init__(self, settings: CatalogSettings, storage_options: Mapping[str, str] | None = None) -> None:
        self.name = settings.name
        self._settings = settings_from(settings, storage_options)
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
