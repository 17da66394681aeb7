"""Catalogs name tables: a profile's ``catalogs:`` entries, opened by type (one line per type below)."""

from __future__ import annotations

from compactor.catalogs.base import Catalog
from compactor.errors import CatalogError
from compactor.models.catalog import CatalogSettings

#: catalog types and the option keys each accepts (profiles.yml validation names the others)
CATALOG_TYPES: dict[str, frozenset[str]] = {}


def _register() -> None:
    from compactor.catalogs.glue import OPTION_KEYS

    CATALOG_TYPES["glue"] = OPTION_KEYS


_register()


def open_catalog(settings: CatalogSettings) -> Catalog:
    if settings.type == "glue":
        from compactor.catalogs.glue import GlueCatalog

        return GlueCatalog(settings)
    raise CatalogError(f"catalog '{settings.name}': unknown type '{settings.type}'",
                       hint=f"types: {', '.join(sorted(CATALOG_TYPES))}")


__all__ = ["CATALOG_TYPES", "Catalog", "open_catalog"]
