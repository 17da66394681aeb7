"""Apache Iceberg in a Spark session, for tests that write Iceberg tables with Spark: ONE local session holds
both formats (Delta's extension and ``spark_catalog``, Iceberg's extension and runtime jar, Iceberg catalogs
under their own names), as the project's single Spark line allows (pyspark 4.1.x, issue 39,
shared/notes/iceberg-setup.md). compactor's own session building knows nothing of Iceberg yet: the jars and
the extension are handed to it here as a profile would hand them (``packages``, ``spark.sql.extensions``).

Catalogs are Iceberg's JDBC catalog on sqlite, shared with pyiceberg's ``SqlCatalog`` of the same name (the
name is a column of ``iceberg_tables``: both sides must use it). They are registered in a running session
(``spark.sql.catalog.<name>.*`` are runtime settings), each under a name of its own: Spark keeps a catalog it
has loaded, so a second registration under a used name would still point at the first folder.

    spark = build_session("local[2]", "tests", conf)          # Delta and Iceberg, or raises
    cat = register_catalog(spark, tmp_path)                   # cat.name, cat.uri (SQLAlchemy), cat.warehouse
    spark.sql(f"CREATE TABLE {cat.name}.db.t (id BIGINT) USING iceberg")
    table = open_table(cat.settings(), "db.t")                # the same table through compactor, no JVM

This module imports neither pyspark nor pyiceberg at import time (tests/conftest.py imports it)."""

from __future__ import annotations

import uuid
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from compactor.formats.iceberg.spark import (  # the runtime compactor loads: the tests load the same
    AWS_BUNDLE,
    ICEBERG_CLASS,
    ICEBERG_EXTENSION,
    SQLITE_JDBC,
    runtime_package,
    spark_needs,
)

if TYPE_CHECKING:
    from compactor.runtime.iceberg_catalog import SqlCatalogSettings

#: Delta's SQL extension (formats/delta/spark.py sets it alone; a session with both lists both)
DELTA_EXTENSION = "io.delta.sql.DeltaSparkSessionExtension"


def packages() -> list[str]:
    """What Ivy resolves for Iceberg besides Delta's jars (the aws bundle: Glue-named tables' tests)."""
    return [runtime_package(), AWS_BUNDLE, SQLITE_JDBC]


def session_conf(conf: Mapping[str, str] | None = None) -> dict[str, str]:
    """``conf`` with both SQL extensions (Delta's first, as its own helper sets it; then Iceberg's)."""
    return {**dict(conf or {}), "spark.sql.extensions": f"{DELTA_EXTENSION},{ICEBERG_EXTENSION}"}


def build_session(master: str, app_name: str, conf: Mapping[str, str] | None = None, *,
                  delta_jars: bool | str = True) -> Any:
    """A new session with Delta (as compactor loads it: formats/delta/spark.py) and Iceberg's runtime,
    extension and sqlite driver. Raises when the jars cannot be loaded (Ivy cannot resolve them)."""
    from compactor.formats.delta.spark import build_session as build

    return build(master, app_name, session_conf(conf), delta_jars=delta_jars, packages=packages())


def iceberg_loaded(spark: Any) -> bool:
    """Whether the session runs Iceberg's SQL: the runtime's classes load and its extension is configured."""
    from compactor.engines.spark_session import session_provides

    return session_provides(spark, spark_needs(False)[0])


@dataclass(frozen=True)
class JdbcCatalog:
    """One sqlite-backed Iceberg catalog, as Spark and pyiceberg each name it."""

    name: str
    root: Path

    @property
    def database(self) -> Path:
        return self.root / "catalog.db"

    @property
    def uri(self) -> str:
        """pyiceberg's (SQLAlchemy's) URL of the catalog's database."""
        return f"sqlite:///{self.database}"

    @property
    def warehouse(self) -> str:
        return f"file://{self.root / 'warehouse'}"

    def settings(self) -> SqlCatalogSettings:
        """compactor's settings of the same catalog (runtime/iceberg_catalog.py opens it with pyiceberg)."""
        from compactor.runtime.iceberg_catalog import SqlCatalogSettings

        return SqlCatalogSettings(self.name, self.uri, self.warehouse)

    def spark_conf(self) -> dict[str, str]:
        """The session settings of the catalog (Iceberg's JDBC catalog, schema V1 as pyiceberg writes it)."""
        base = f"spark.sql.catalog.{self.name}"
        return {base: ICEBERG_CLASS, f"{base}.type": "jdbc", f"{base}.uri": f"jdbc:sqlite:{self.database}",
                f"{base}.jdbc.schema-version": "V1", f"{base}.warehouse": self.warehouse}


def register_catalog(spark: Any, root: Path, name: str | None = None, namespace: str | None = "db") -> JdbcCatalog:
    """A new catalog in ``root`` (its database and warehouse), registered in the running session under
    ``name`` (default: a fresh ``ice_<hex>``: a name Spark has loaded cannot be pointed elsewhere), with
    ``namespace`` created."""
    root = Path(root).resolve()
    (root / "warehouse").mkdir(parents=True, exist_ok=True)
    cat = JdbcCatalog(name or f"ice_{uuid.uuid4().hex[:10]}", root)
    for k, v in cat.spark_conf().items():
        spark.conf.set(k, v)
    if namespace:
        spark.sql(f"CREATE NAMESPACE IF NOT EXISTS {cat.name}.{namespace}")
    return cat


def register_rest_catalog(spark: Any, uri: str, name: str | None = None, namespace: str | None = "db") -> str:
    """Iceberg's REST catalog at ``uri`` registered in the running session under ``name`` (default: a fresh
    ``rest_<hex>``), with ``namespace`` created; returns the name."""
    name = name or f"rest_{uuid.uuid4().hex[:10]}"
    base = f"spark.sql.catalog.{name}"
    for k, v in {base: ICEBERG_CLASS, f"{base}.type": "rest", f"{base}.uri": uri}.items():
        spark.conf.set(k, v)
    if namespace:
        spark.sql(f"CREATE NAMESPACE IF NOT EXISTS {name}.{namespace}")
    return name


def pyiceberg_catalog(cat: JdbcCatalog) -> Any:
    """pyiceberg's ``SqlCatalog`` over the same database, under the same name (compactor's opener)."""
    from compactor.runtime.iceberg_catalog import open_catalog

    return open_catalog(cat.settings())
