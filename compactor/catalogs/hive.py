"""A Hive metastore through Spark's Hive support: a database's tables as locations and formats.

The catalog opens (or reuses) a SparkSession with ``spark.sql.catalogImplementation=hive``: a remote
metastore (``metastore_uris``: thrift://...) or an embedded Derby one (``metastore_db``: a folder), and the
warehouse (``warehouse``). ``SHOW TABLES IN <db>`` lists a database and ``DESCRIBE TABLE EXTENDED`` gives
each table's provider, location and properties (a table whose ``table_type`` is ICEBERG is an Iceberg table,
read by that format through the metastore's thrift API). A JVM starts only for this lookup; planning and the
local engine's apply stay on delta-rs. A policy of the Iceberg format reads a served metastore through
pyiceberg instead, without a JVM (catalogs/iceberg_catalogs.py). With the profile's ``spark.remote`` the
lookup runs on the Spark Connect server, against the metastore the server was started with (its Hive
settings are the server's).
"""

from __future__ import annotations

from dataclasses import replace
from typing import Any

from compactor.catalogs.base import by_provider, local_path
from compactor.catalogs.iceberg_catalogs import PROVIDER as ICEBERG
from compactor.engines.spark_needs import NeedsSource, no_needs
from compactor.engines.spark_session import get_or_create_session
from compactor.errors import CatalogError
from compactor.models.catalog import CatalogSettings, CatalogTable
from compactor.project.model import SparkSettings
from compactor.runtime.progress import phase


def _quote(name: str) -> str:
    return "`" + name.replace("`", "``") + "`"


#: Spark's error conditions of a name the metastore does not hold
_NOT_FOUND = ("TABLE_OR_VIEW_NOT_FOUND", "SCHEMA_NOT_FOUND", "NO_SUCH_TABLE", "NO_SUCH_DATABASE")


def _first_line(e: BaseException) -> str:
    text = str(e).strip()
    return (text.splitlines()[0] if text else type(e).__name__)[:300]


def metastore_cause(e: BaseException, metastore_db: str | None, metastore_uris: str | None) -> str:
    """Why the metastore cannot be read, in words, from Spark's error and the Java causes under it (Hive
    reports a locked Derby database as "Unable to instantiate SessionHiveMetaStoreClient"; the cause is
    two exceptions further down)."""
    text = f"{e}\n{getattr(e, '_stackTrace', '') or ''}"
    if "Another instance of Derby may have already booted" in text or "XSDB6" in text:
        return (f"the Derby metastore {metastore_db or ''} is in use by another process (a running `dbt run` or "
                "Spark session?): embedded Derby admits one process at a time; wait for it to end, or serve "
                "the metastore (metastore_uris)").replace("metastore  is", "metastore is")
    started = next((line.strip() for line in text.splitlines() if "Failed to start database" in line), None)
    if started:
        return f"the Derby metastore cannot be opened: {started[:300]}"
    if metastore_uris and any(x in text for x in ("TTransportException", "Connection refused",
                                                  "Could not connect to meta store")):
        return f"the metastore server at {metastore_uris} does not answer ({_first_line(e)})"
    return f"the metastore cannot be read: {_first_line(e)}"


class HiveCatalog:
    def __init__(self, settings: CatalogSettings, spark: SparkSettings, needs: NeedsSource = no_needs) -> None:
        """``needs``: what the session needs for the tables' formats (the engine reuses the session)."""
        self.name = settings.name
        self._needs = needs
        o = settings.options
        conf = {**spark.conf, "spark.sql.catalogImplementation": "hive"}
        if spark.remote:  # a Spark Connect server has its metastore: these are static settings of the server
            conf, o = dict(spark.conf), {}
        if o.get("warehouse"):
            conf["spark.sql.warehouse.dir"] = o["warehouse"]
        if o.get("metastore_uris"):
            conf["spark.hadoop.hive.metastore.uris"] = o["metastore_uris"]
        if o.get("metastore_db"):
            conf["spark.hadoop.javax.jdo.option.ConnectionURL"] = f"jdbc:derby:;databaseName={o['metastore_db']};create=true"
            # Derby's log goes next to the metastore, not into the working directory
            conf.setdefault("spark.driver.extraJavaOptions", f"-Dderby.stream.error.file={o['metastore_db']}.log")
            # a Derby database another process holds stays held for minutes (a dbt run): Hive's default
            # 10 attempts 2 s apart only delay the answer (measured: 49 s to fail instead of about 20)
            conf.setdefault("spark.hadoop.hive.hmshandler.retry.attempts", "1")
        self._where = (o.get("metastore_db"), o.get("metastore_uris"))
        self._spark = replace(spark, conf=conf)
        self._session: Any = None
        #: why the metastore cannot be read, once known (every later lookup fails alike, without retrying)
        self._unreadable: str | None = None

    def _open(self) -> Any:
        if self._unreadable is not None:
            raise CatalogError(self._unreadable)
        if self._session is None:
            session = get_or_create_session(self._spark, needs=self._needs, purpose=f"catalog '{self.name}' (hive)")
            if session.conf.get("spark.sql.catalogImplementation", "in-memory") != "hive":
                raise CatalogError(f"catalog '{self.name}' (hive): the running Spark session has no Hive support",
                                   hint="let compactor start the session, or start yours with enableHiveSupport()")
            try:
                with phase(f"opening the Hive metastore of catalog '{self.name}'", announce=False):
                    session.sql("SHOW DATABASES").collect()
            except Exception as e:  # noqa: BLE001 - the metastore itself: every table would fail alike
                self._unreadable = metastore_cause(e, *self._where)
                raise CatalogError(self._unreadable) from None
            self._session = session
        return self._session

    def _sql(self, what: str, statement: str) -> list[Any]:
        """Rows of ``statement``; CatalogError saying ``what`` failed and why (``_Missing`` for a name the
        metastore does not hold)."""
        try:
            session = self._open()
        except CatalogError as e:
            raise CatalogError(f"catalog '{self.name}' (hive): {what}: {e.message}") from None
        try:
            with phase(f"reading catalog '{self.name}' ({statement})", announce=False):
                return list(session.sql(statement).collect())
        except Exception as e:  # noqa: BLE001 - AnalysisException and friends: one line, no traceback
            condition = getattr(e, "getCondition", lambda: None)()
            error = _Missing if any(c in str(condition or _first_line(e)) for c in _NOT_FOUND) else CatalogError
            raise error(f"catalog '{self.name}' (hive): {what}: {_first_line(e)}") from None

    def list_tables(self, namespace: str) -> list[CatalogTable]:
        rows = self._sql(f"cannot list the tables of database '{namespace}'", f"SHOW TABLES IN {_quote(namespace)}")
        names = sorted(str(r["tableName"]) for r in rows if not r["isTemporary"])
        return [self.get_table(namespace, n) for n in names]

    def get_table(self, namespace: str, name: str) -> CatalogTable:
        """The table's location and format. A table the metastore does not hold, or a metastore that cannot be
        read, is a CatalogError (the plan's error: a table that cannot be read is never a silent skip); a
        table whose format cannot be described (an Iceberg table without the Iceberg jars) is reported as
        not planned."""
        try:
            rows = self._sql(f"cannot read table '{namespace}.{name}'",
                             f"DESCRIBE TABLE EXTENDED {_quote(namespace)}.{_quote(name)}")
        except _Missing:
            raise
        except CatalogError as e:
            if self._unreadable is not None:
                raise
            return CatalogTable(self.name, namespace, name, None, None, e.message)
        info = {str(r["col_name"]).strip(): str(r["data_type"] or "").strip() for r in rows}
        props = info.get("Table Properties", "")
        location = local_path(info["Location"]) if info.get("Location") else None
        if f"TABLE_TYPE={ICEBERG.upper()}" in props.replace(" ", "").upper():
            # the Iceberg format reads it through the metastore's thrift API (runtime/iceberg_catalog.py)
            return by_provider(self.name, namespace, name, ICEBERG, location, kind="an Iceberg table")
        provider = info.get("Provider", "").lower()
        return by_provider(self.name, namespace, name, provider, location, kind=f"a {provider or 'Hive'} table")


class _Missing(CatalogError):
    """A database or table the metastore does not hold."""
