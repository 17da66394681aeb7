"""Iceberg in the spark engine's session: what the session needs (Iceberg's Spark runtime for the installed
pyspark's Spark line, its SQL extension, the sqlite JDBC driver of SQL catalogs on sqlite), and the table
as Iceberg's Java library loads it from the same catalog pyiceberg reads (``java_table``): a SQL catalog
becomes Iceberg's JDBC catalog over the same database, a REST catalog the same REST server, a Hive catalog
Iceberg's HiveCatalog on the same metastore (through the Hive client Spark ships).

Iceberg's runtime is tested at ``ICEBERG_VERSION`` (spark_rewrite.py uses its rewrite internals and
refuses another version). Over Spark Connect there is no JVM in this process: the Iceberg path refuses."""

from __future__ import annotations

import contextlib
import logging
from collections.abc import Iterator
from typing import Any
from urllib.parse import unquote, urlsplit

from compactor.engines.spark_needs import SparkNeeds
from compactor.errors import UnsupportedTableError
from compactor.models.table import TableLocation
from compactor.runtime.iceberg_catalog import (
    HiveCatalogSettings,
    IcebergCatalogError,
    IcebergCatalogSettings,
    RestCatalogSettings,
    SqlCatalogSettings,
    cause,
    describe,
    parse_identifier,
    settings_from,
)

log = logging.getLogger(__name__)

#: the Iceberg release whose Spark runtime compactor loads and is tested with (1.12.0 has runtimes for
#: Spark 4.1, none for 4.2)
ICEBERG_VERSION = "1.12.0"
#: Iceberg's SQL extension (CALL procedures, ALTER TABLE ... partition fields, WRITE ORDERED BY)
ICEBERG_EXTENSION = "org.apache.iceberg.spark.extensions.IcebergSparkSessionExtensions"
#: a class of the runtime jar: the jar loaded when it does
ICEBERG_CLASS = "org.apache.iceberg.spark.SparkCatalog"
#: the JDBC driver of SQL catalogs kept in sqlite (other databases: add their driver to spark.packages)
SQLITE_JDBC = "org.xerial:sqlite-jdbc:3.54.1.0"


def runtime_package() -> str:
    """Iceberg's Spark runtime for the installed pyspark's Spark line (``iceberg-spark-runtime-4.1_2.13``)."""
    import pyspark

    line = ".".join(pyspark.__version__.split(".")[:2])
    return f"org.apache.iceberg:iceberg-spark-runtime-{line}_2.13:{ICEBERG_VERSION}"


def spark_needs(loads: bool) -> tuple[SparkNeeds, ...]:
    """What a session needs for Iceberg tables. Not required: a session a catalog lookup opens for tables of
    any format (tasks/spark_needs.any_format) must still start for Delta's when Iceberg's jars cannot be
    resolved; the spark engine's Iceberg path then refuses, naming the missing runtime (spark_rewrite.py)."""
    packages = (runtime_package(), SQLITE_JDBC) if loads else ()
    return (SparkNeeds("Apache Iceberg", packages=packages, conf=(("spark.sql.extensions", ICEBERG_EXTENSION),),
                       jvm_class=ICEBERG_CLASS, sql_extension=ICEBERG_EXTENSION,
                       hint=f"check Maven Central access ({runtime_package() if loads else 'the Iceberg runtime'})",
                       connect_hint="compactor's Iceberg path on the spark engine needs a local JVM"),)


def _jdbc(uri: str) -> dict[str, str]:
    """Iceberg's JDBC catalog properties for pyiceberg's SQLAlchemy URL ``uri``."""
    parts = urlsplit(uri)
    dialect = parts.scheme.split("+", 1)[0]
    if dialect == "sqlite":
        return {"uri": f"jdbc:sqlite:{unquote(uri.split(':///', 1)[1]) if ':///' in uri else ''}"}
    if dialect in ("postgresql", "postgres", "mysql"):
        host = parts.hostname or "localhost"
        port = f":{parts.port}" if parts.port else ""
        props = {"uri": f"jdbc:{'postgresql' if dialect != 'mysql' else 'mysql'}://{host}{port}{parts.path}"}
        if parts.username:
            props["jdbc.user"] = unquote(parts.username)
        if parts.password:
            props["jdbc.password"] = unquote(parts.password)
        return props
    raise IcebergCatalogError(f"SQL catalog URL {parts.scheme}://...: the spark engine opens SQL catalogs on "
                              "sqlite, PostgreSQL and MySQL through Iceberg's JDBC catalog")


def java_catalog_properties(settings: IcebergCatalogSettings) -> dict[str, str]:
    """The properties Iceberg's Java ``CatalogUtil.buildIcebergCatalog`` opens the same catalog with."""
    if not isinstance(settings, SqlCatalogSettings | RestCatalogSettings | HiveCatalogSettings):
        raise IcebergCatalogError(f"{describe(settings)}: the spark engine opens Iceberg tables of sql, rest and hive "
                                  f"catalogs (a {settings.kind} catalog's tables are compacted by the local engine)")
    props = {str(k): str(v) for k, v in settings.properties.items()}
    if settings.warehouse is not None:
        props["warehouse"] = settings.warehouse
    if isinstance(settings, HiveCatalogSettings):  # Iceberg's HiveCatalog, through Spark's Hive client jars
        props.update(type="hive", uri=settings.uri)
        return props
    if isinstance(settings, RestCatalogSettings):
        props.update(type="rest", uri=settings.uri)
        if settings.credential is not None:
            props["credential"] = settings.credential
        if settings.token is not None:
            props["token"] = settings.token
        return props
    props.update(type="jdbc", **_jdbc(settings.uri))
    props.setdefault("jdbc.schema-version", "V1")  # the schema pyiceberg's SqlCatalog creates and reads
    return props


def _java_catalog(spark: Any, settings: IcebergCatalogSettings) -> Any:
    """Iceberg's Java catalog for ``settings`` in ``spark``'s JVM (the caller closes it)."""
    jvm = spark._jvm
    props = jvm.java.util.HashMap()
    for k, v in java_catalog_properties(settings).items():
        props.put(k, v)
    try:
        return jvm.org.apache.iceberg.CatalogUtil.buildIcebergCatalog(settings.name, props,
                                                                      spark._jsc.hadoopConfiguration())
    except Exception as e:  # noqa: BLE001 - py4j wraps the JVM's exceptions
        raise IcebergCatalogError(f"{describe(settings)}: Spark cannot open it: {cause(e)}") from None


def use_session_loader(spark: Any) -> None:
    """Make the JVM thread serving this Python thread look classes up through the session's class loader:
    py4j resolves ``jvm.org.apache.iceberg...`` through the thread's context class loader, and a thread py4j
    started for a worker thread of this process may have one that does not see the jars Spark loaded
    (``spark.jars``): Iceberg's classes then look absent at random."""
    jvm = spark._jvm
    thread = jvm.java.lang.Thread.currentThread()
    thread.setContextClassLoader(spark._jsparkSession.sharedState().jarClassLoader())


@contextlib.contextmanager
def java_table(spark: Any, location: TableLocation) -> Iterator[Any]:
    """The table ``location`` names, loaded by Iceberg's Java library in ``spark``'s JVM, through a catalog
    opened for the caller's block and closed after it (a catalog kept across runs would keep connections
    to a database that may have been replaced)."""
    from compactor.engines.spark_connect import is_connect

    if is_connect(spark):
        raise UnsupportedTableError(f"{location.identifier}: the spark engine's Iceberg path needs a local JVM and "
                                    "the session is a Spark Connect session",
                                    hint="use a target whose spark settings start a local session, or the local engine")
    ident, profile = location.identifier, location.catalog
    if ident is None or profile is None:
        raise IcebergCatalogError(f"{location.uri}: an Iceberg table is opened through its catalog")
    settings = settings_from(profile, location.storage_options)
    use_session_loader(spark)
    parts = parse_identifier(f"{ident.namespace}.{ident.table}")
    catalog = _java_catalog(spark, settings)
    try:
        try:
            table = catalog.loadTable(spark._jvm.org.apache.iceberg.catalog.TableIdentifier.parse(".".join(parts)))
        except Exception as e:  # noqa: BLE001
            raise IcebergCatalogError(f"{describe(settings)}: Spark cannot load table {'.'.join(parts)}: "
                                      f"{cause(e)}") from None
        yield table
    finally:
        try:  # the JDBC and REST catalogs are Closeable (their connection pools, their HTTP client)
            catalog.close()
        except Exception as e:  # noqa: BLE001 - the action's outcome stands
            log.debug("closing %s: %s", describe(settings), e)


def iceberg_version(spark: Any) -> str:
    """The version of the Iceberg library loaded in ``spark``'s JVM."""
    use_session_loader(spark)
    return str(spark._jvm.org.apache.iceberg.IcebergBuild.version())
