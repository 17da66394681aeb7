"""What compactor asks of a catalog: the tables of a namespace, as locations and formats."""

from __future__ import annotations

from typing import Protocol

from compactor.models.catalog import CatalogTable
from compactor.models.formats import format_for_provider


def local_path(location: str) -> str:
    """A catalog's ``file:`` location (``file:/x``, ``file:///x``) as a local path; other locations as given."""
    for prefix in ("file://", "file:"):
        if location.startswith(prefix) and location[len(prefix):].startswith("/"):
            return location[len(prefix):]
    return location


def by_provider(catalog: str, namespace: str, name: str, provider: str, location: str | None, *,
                kind: str) -> CatalogTable:
    """A table as its catalog registers it: planned in the format its provider (``delta``) maps to, or
    reported with why not (``kind``: what the table is, when no format of compactor's is its provider)."""
    spec = format_for_provider(provider) if provider else None
    if spec is None:
        return CatalogTable(catalog, namespace, name, location, None,
                            f"{kind}: compactor plans Delta tables and Spark file-sink outputs")
    if not location:
        return CatalogTable(catalog, namespace, name, None, None,
                            f"the catalog records no location for this {spec.name} table")
    return CatalogTable(catalog, namespace, name, location, spec.name)


class Catalog(Protocol):
    name: str

    def list_tables(self, namespace: str) -> list[CatalogTable]:
        """Every table of ``namespace``, in the catalog's order. Raises CatalogError with the reason."""

    def get_table(self, namespace: str, name: str) -> CatalogTable:
        """One table. Raises CatalogError when it is not there or cannot be read."""
