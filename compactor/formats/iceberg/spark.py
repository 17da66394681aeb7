"""Iceberg in the spark engine's session: what the session needs (Iceberg's Spark runtime for the installed
pyspark's Spark line, its SQL extension, the sqlite JDBC driver of SQL catalogs on sqlite), and the table
as Iceberg's Java library loads it from the same catalog pyiceberg reads (``java_table``): a SQL catalog
becomes Iceberg's JDBC catalog over the same database, a REST catalog the same REST server, a Hive catalog
Iceberg's HiveCatalog on the same metastore (through the Hive client Spark ships), a Glue catalog Iceberg's
GlueCatalog on the same Glue with the table's files through S3FileIO (the AWS SDK of Iceberg's aws bundle).

Iceberg's runtime is tested at ``ICEBERG_VERSION`` (spark_rewrite.py uses its rewrite internals and
refuses another version). Over Spark Connect there is no JVM in this process: the Iceberg path refuses."""

from __future__ import annotations

import contextlib
import logging
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from typing import Any
from urllib.parse import unquote, urlsplit

from compactor.engines.spark_needs import SparkNeeds
from compactor.errors import UnsupportedTableError
from compactor.models.table import TableLocation
from compactor.runtime.iceberg_catalog import (
    GlueCatalogSettings,
    HiveCatalogSettings,
    IcebergCatalogError,
    IcebergCatalogSettings,
    RestCatalogSettings,
    cause,
    describe,
    parse_identifier,
    register_property_secrets,
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
#: Iceberg's AWS module's dependencies (the AWS SDK v2 Glue and S3 clients: GlueCatalog, S3FileIO); 66 MiB
AWS_BUNDLE = f"org.apache.iceberg:iceberg-aws-bundle:{ICEBERG_VERSION}"
GLUE_CATALOG = "org.apache.iceberg.aws.glue.GlueCatalog"
S3_FILE_IO = "org.apache.iceberg.aws.s3.S3FileIO"
#: pyiceberg's S3 FileIO properties (from the target's storage options) that Iceberg's S3FileIO reads too
_S3_KEYS = ("s3.endpoint", "s3.access-key-id", "s3.secret-access-key", "s3.session-token")
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
    packages = (runtime_package(), AWS_BUNDLE, SQLITE_JDBC) if loads else ()
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


def _glue_properties(settings: GlueCatalogSettings) -> dict[str, str]:
    """Iceberg's GlueCatalog and S3FileIO properties of ``settings``. As pyiceberg's S3 FileIO does, S3 is
    reached with the catalog's AWS keys unless the target's storage options name S3's own; an S3 endpoint
    of the storage options (an S3-compatible store) is addressed path-style, as object_store does."""
    io = {str(k): str(v) for k, v in settings.properties.items()}
    props = {"catalog-impl": GLUE_CATALOG, "io-impl": S3_FILE_IO}
    region = settings.region or io.get("s3.region")
    if region:
        props["client.region"] = region
    if settings.endpoint_url:
        props["glue.endpoint"] = settings.endpoint_url
    if settings.catalog_id:
        props["glue.id"] = settings.catalog_id
    props.update((k, io[k]) for k in _S3_KEYS if io.get(k))
    if "s3.access-key-id" not in props and settings.aws_access_key_id and settings.aws_secret_access_key:
        props["s3.access-key-id"] = settings.aws_access_key_id
        props["s3.secret-access-key"] = settings.aws_secret_access_key
        if settings.aws_session_token:
            props["s3.session-token"] = settings.aws_session_token
    if "s3.endpoint" in props:
        props["s3.path-style-access"] = "true"
    return props


def java_catalog_properties(settings: IcebergCatalogSettings) -> dict[str, str]:
    """The properties Iceberg's Java ``CatalogUtil.buildIcebergCatalog`` opens the same catalog with."""
    if isinstance(settings, GlueCatalogSettings):
        return _glue_properties(settings)
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


def _glue_credentials(jvm: Any, settings: GlueCatalogSettings) -> Any | None:
    """The AWS SDK credentials provider of the catalog's own keys (or AWS profile) for its Glue client;
    None: the driver's default AWS chain (its environment, ~/.aws, the instance's role)."""
    creds = jvm.software.amazon.awssdk.auth.credentials
    key, secret, token = settings.aws_access_key_id, settings.aws_secret_access_key, settings.aws_session_token
    if key and secret:
        pair = (creds.AwsSessionCredentials.create(key, secret, token) if token
                else creds.AwsBasicCredentials.create(key, secret))
        return creds.StaticCredentialsProvider.create(pair)
    if settings.profile:
        return creds.ProfileCredentialsProvider.create(settings.profile)
    return None


def _glue_catalog(spark: Any, settings: GlueCatalogSettings, props: Any, provider: Any) -> Any:
    """Iceberg's GlueCatalog whose Glue client signs with ``provider``. Iceberg's catalog properties give
    the Glue client no keys of its own (only a credentials provider class, or the default chain), so the
    client is built here and handed to the catalog's ``initialize`` that takes one: package-private in
    Iceberg 1.12.0 (ICEBERG_VERSION; spark_rewrite.py refuses another version), called by reflection."""
    jvm, gateway = spark._jvm, spark.sparkContext._gateway
    builder = jvm.software.amazon.awssdk.services.glue.GlueClient.builder()
    if props.get("client.region"):
        builder.region(jvm.software.amazon.awssdk.regions.Region.of(props.get("client.region")))
    if settings.endpoint_url:
        builder.endpointOverride(jvm.java.net.URI.create(settings.endpoint_url))
    client = builder.credentialsProvider(provider).build()
    loader = spark._jsparkSession.sharedState().jarClassLoader()
    klass = jvm.java.lang.Class
    names = ("java.lang.String", "java.lang.String", "org.apache.iceberg.aws.AwsProperties",
             "org.apache.iceberg.aws.s3.S3FileIOProperties", "software.amazon.awssdk.services.glue.GlueClient",
             "org.apache.iceberg.LockManager", "java.util.Map")
    types = gateway.new_array(klass, len(names))
    for i, name in enumerate(names):
        types[i] = klass.forName(name, True, loader)
    initialize = klass.forName(GLUE_CATALOG, True, loader).getDeclaredMethod("initialize", types)
    initialize.setAccessible(True)
    catalog = jvm.org.apache.iceberg.aws.glue.GlueCatalog()
    catalog.setConf(spark._jsc.hadoopConfiguration())
    args = gateway.new_array(jvm.java.lang.Object, len(names))
    # no warehouse (tables are loaded, not created), no lock manager (Glue's optimistic locking, as
    # GlueCatalog uses without a lock-impl)
    for i, arg in enumerate((settings.name, None, jvm.org.apache.iceberg.aws.AwsProperties(props),
                             jvm.org.apache.iceberg.aws.s3.S3FileIOProperties(props), client, None, props)):
        args[i] = arg
    initialize.invoke(catalog, args)
    return catalog


def _java_catalog(spark: Any, settings: IcebergCatalogSettings) -> Any:
    """Iceberg's Java catalog for ``settings`` in ``spark``'s JVM (the caller closes it)."""
    jvm = spark._jvm
    properties = java_catalog_properties(settings)
    register_property_secrets(properties)
    props = jvm.java.util.HashMap()
    for k, v in properties.items():
        props.put(k, v)
    try:
        if isinstance(settings, GlueCatalogSettings):
            provider = _glue_credentials(jvm, settings)
            if provider is not None:
                return _glue_catalog(spark, settings, props, provider)
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


@dataclass(frozen=True)
class JavaCommitFailure:
    """An Iceberg commit's failure as py4j hands it over: the first line of the JVM's exception, and what the
    exception class its text names says of the commit."""

    first: str
    #: ``CommitStateUnknownException``: the catalog did not say whether the commit landed
    unknown: bool
    #: ``ValidationException`` or ``CommitFailedException``: the table changed, nothing was committed
    stale: bool


def java_commit_failure(e: BaseException) -> JavaCommitFailure:
    """What a failed commit of Iceberg's Java library (a ``RewriteFiles``, a Spark action) says."""
    java = str(getattr(e, "java_exception", e)).strip()
    return JavaCommitFailure(java.splitlines()[0] if java else type(e).__name__, "CommitStateUnknownException" in java,
                             "ValidationException" in java or "CommitFailedException" in java)


def committed_snapshot(jtable: Any, properties: Mapping[str, str], operation: str | None = None) -> Any | None:
    """The newest snapshot in the Java table's current history (read again) whose summary holds ``properties``
    (and whose operation is ``operation``): the one a commit carrying them made, other writers' after it aside."""
    jtable.refresh()
    snapshot = jtable.currentSnapshot()
    while snapshot is not None:
        summary = snapshot.summary()
        if (operation is None or str(snapshot.operation()) == operation) \
                and all(summary.get(k) == v for k, v in properties.items()):
            return snapshot
        parent = snapshot.parentId()
        snapshot = jtable.snapshot(parent) if parent is not None else None
    return None


def iceberg_version(spark: Any) -> str:
    """The version of the Iceberg library loaded in ``spark``'s JVM."""
    use_session_loader(spark)
    return str(spark._jvm.org.apache.iceberg.IcebergBuild.version())
