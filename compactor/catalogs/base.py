"""What compactor asks of a catalog: the tables of a namespace, as locations and formats."""

from __future__ import annotations

from typing import Protocol

from compactor.models.catalog import CatalogTable


class Catalog(Protocol):
    name: str

    def list_tables(self, namespace: str) -> list[CatalogTable]:
        """Every table of ``namespace``, in the catalog's order. Raises CatalogError with the reason."""

    def get_table(self, namespace: str, name: str) -> CatalogTable:
        """One table. Raises CatalogError when it is not there or cannot be read."""
