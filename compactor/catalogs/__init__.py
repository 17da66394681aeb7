"""Catalogs name tables: a profile's ``catalogs:`` entries, opened by type (one line per type below)."""

from __future__ import annotations

from collections.abc import Collection, Mapping

from compactor.catalogs.base import Catalog
from compactor.engines.spark_needs import NeedsSource, no_needs
from compactor.errors import CatalogError
from compactor.models.catalog import CATALOG_TYPES, CatalogSettings
from compactor.project.model import SparkSettings


def open_catalog(settings: CatalogSettings, spark: SparkSettings | None = None,
                 needs: NeedsSource = no_needs, *, providers: Collection[str] = (),
                 storage_options: Mapping[str, str] | None = None) -> Catalog:
    """The catalog of a profile entry. ``spark``: the target's Spark settings (a Hive metastore is read
    through a SparkSession built from them, with ``needs``: what its tables' formats need of it).
    ``providers``: the tables wanted are of these providers only (a policy of a format whose tables are named
    by a catalog only): a glue or hive catalog is then read through that format's own catalog client when
    there is one (Iceberg's: pyiceberg, no JVM). ``storage_options``: the target's (the tables' store)."""
    from compactor.catalogs.iceberg_catalogs import PROVIDER, PYICEBERG_TYPES

    if settings.type in PYICEBERG_TYPES and (PROVIDER in providers or settings.type in ("sql", "rest")):
        from compactor.catalogs.iceberg_catalogs import IcebergCatalog

        return IcebergCatalog(settings, storage_options)
    if settings.type == "glue":
        from compactor.catalogs.glue import GlueCatalog

        return GlueCatalog(settings)
    if settings.type == "hive":
        from compactor.catalogs.hive import HiveCatalog

        return HiveCatalog(settings, spark or SparkSettings(), needs)
    if settings.type == "unity":
        from compactor.catalogs.unity import UnityCatalog

        return UnityCatalog(settings)
    raise CatalogError(f"catalog '{settings.name}': unknown type '{settings.type}'",
                       hint=f"types: {', '.join(sorted(CATALOG_TYPES))}")


__all__ = ["CATALOG_TYPES", "Catalog", "open_catalog"]
