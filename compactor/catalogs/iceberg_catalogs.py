"""Iceberg catalogs (profiles.yml ``type: sql`` or ``type: rest``), read through pyiceberg (no JVM): the
tables of a namespace, each with its location, planned as Iceberg tables (the format reads and commits them
through the same catalog, by identifier: compactor/formats/iceberg/catalog.py opens it there).

Every failure is a CatalogError in one line naming the catalog, the table and the cause: a catalog that cannot
be opened (a database it cannot reach, a server that does not answer), a namespace or table it does not
hold."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from compactor.catalogs.base import by_provider, local_path
from compactor.errors import CatalogError
from compactor.models.catalog import CatalogSettings, CatalogTable
from compactor.runtime.secrets import redact

if TYPE_CHECKING:
    from pyiceberg.catalog import Catalog as PyicebergCatalog

#: the provider a table of these catalogs is registered under (the registry maps it to its format)
PROVIDER = "iceberg"


def _cause(e: BaseException) -> str:
    text = str(e).strip().splitlines()
    return redact(f"{type(e).__name__}: {text[0]}" if text else type(e).__name__)


class IcebergCatalog:
    """A ``sql`` or ``rest`` catalog of the target (its options are pyiceberg's catalog properties)."""

    def __init__(self, settings: CatalogSettings) -> None:
        self.name = settings.name
        self._settings = settings
        self._catalog: PyicebergCatalog | None = None

    @property
    def _where(self) -> str:
        return f"catalog '{self.name}' ({self._settings.type} at {self._settings.options.get('uri', '?')})"

    def _open(self) -> PyicebergCatalog:
        if self._catalog is None:
            props: dict[str, Any] = dict(self._settings.options)
            try:
                if self._settings.type == "sql":
                    from pyiceberg.catalog.sql import SqlCatalog

                    self._catalog = SqlCatalog(self.name, **props)
                else:
                    from pyiceberg.catalog.rest import RestCatalog

                    self._catalog = RestCatalog(self.name, **props)
            except ImportError as e:
                raise CatalogError(f"{self._where}: cannot open it: {_cause(e)}",
                                   hint="install compactor's Iceberg support: pip install 'compactor[iceberg]'") from None
            except Exception as e:  # noqa: BLE001 - pyiceberg and its drivers raise many kinds: one line
                raise CatalogError(f"{self._where}: cannot open it: {_cause(e)}") from None
        return self._catalog

    def list_tables(self, namespace: str) -> list[CatalogTable]:
        catalog = self._open()
        try:
            names = catalog.list_tables(namespace)
        except Exception as e:  # noqa: BLE001
            raise CatalogError(f"{self._where}: cannot list the tables of namespace '{namespace}': {_cause(e)}") from None
        return [self.get_table(namespace, ident[-1]) for ident in names]

    def get_table(self, namespace: str, name: str) -> CatalogTable:
        from pyiceberg.exceptions import NoSuchNamespaceError, NoSuchTableError

        catalog = self._open()
        try:
            table = catalog.load_table((*namespace.split("."), name))
        except (NoSuchTableError, NoSuchNamespaceError):
            raise CatalogError(f"{self._where} has no table {namespace}.{name}") from None
        except Exception as e:  # noqa: BLE001
            raise CatalogError(f"{self._where}: cannot load table {namespace}.{name}: {_cause(e)}") from None
        return by_provider(self.name, namespace, name, PROVIDER, local_path(table.location()),
                           kind="an Iceberg table")
