"""Catalogs name tables: a profile's ``catalogs:`` entries, opened by type (one line per type below)."""

from __future__ import annotations

from compactor.catalogs.base import Catalog
from compactor.engines.spark_needs import NeedsSource, no_needs
from compactor.errors import CatalogError
from compactor.models.catalog import CATALOG_TYPES, CatalogSettings
from compactor.project.model import SparkSettings


def open_catalog(settings: CatalogSettings, spark: SparkSettings | None = None,
                 needs: NeedsSource = no_needs) -> Catalog:
    """The catalog of a profile entry. ``spark``: the target's Spark settings (a Hive metastore is read
    through a SparkSession built from them, with ``needs``: what its tables' formats need of it)."""
    if settings.type == "glue":
        from compactor.catalogs.glue import GlueCatalog

        return GlueCatalog(settings)
    if settings.type == "hive":
        from compactor.catalogs.hive import HiveCatalog

        return HiveCatalog(settings, spark or SparkSettings(), needs)
    if settings.type == "unity":
        from compactor.catalogs.unity import UnityCatalog

        return UnityCatalog(settings)
    if settings.type in ("sql", "rest"):
        from compactor.catalogs.iceberg_catalogs import IcebergCatalog

        return IcebergCatalog(settings)
    raise CatalogError(f"catalog '{settings.name}': unknown type '{settings.type}'",
                       hint=f"types: {', '.join(sorted(CATALOG_TYPES))}")


__all__ = ["CATALOG_TYPES", "Catalog", "open_catalog"]
