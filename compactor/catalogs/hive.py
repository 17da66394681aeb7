"""A Hive metastore through Spark's Hive support: a database's tables as locations and formats.

The catalog opens (or reuses) a SparkSession with ``spark.sql.catalogImplementation=hive``: a remote
metastore (``metastore_uris``: thrift://...) or an embedded Derby one (``metastore_db``: a folder), and the
warehouse (``warehouse``). ``SHOW TABLES IN <db>`` lists a database and ``DESCRIBE TABLE EXTENDED`` gives
each table's provider, location and properties. A JVM starts only for this lookup; planning and the local
engine's apply stay on delta-rs. With the profile's ``spark.remote`` the lookup runs on the Spark Connect
server, against the metastore the server was started with (its Hive settings are the server's).
"""

from __future__ import annotations

from dataclasses import replace
from typing import Any

from compactor.catalogs.base import by_provider, local_path
from compactor.engines.spark_session import get_or_create_session
from compactor.errors import CatalogError
from compactor.models.catalog import CatalogSettings, CatalogTable
from compactor.project.model import SparkSettings


def _quote(name: str) -> str:
    return "`" + name.replace("`", "``") + "`"


class HiveCatalog:
    def __init__(self, settings: CatalogSettings, spark: SparkSettings) -> None:
        self.name = settings.name
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
        self._spark = replace(spark, conf=conf)
        self._session: Any = None

    def _sql(self, what: str, statement: str) -> list[Any]:
        if self._session is None:
            session = get_or_create_session(self._spark)
            if session.conf.get("spark.sql.catalogImplementation", "in-memory") != "hive":
                raise CatalogError(f"catalog '{self.name}' (hive): the running Spark session has no Hive support",
                                   hint="let compactor start the session, or start yours with enableHiveSupport()")
            self._session = session
        try:
            return list(self._session.sql(statement).collect())
        except Exception as e:  # noqa: BLE001 - AnalysisException and friends: one line, no traceback
            first = str(e).strip().splitlines()[0] if str(e).strip() else type(e).__name__
            raise CatalogError(f"catalog '{self.name}' (hive): {what}: {first[:300]}") from None

    def list_tables(self, namespace: str) -> list[CatalogTable]:
        rows = self._sql(f"cannot list the tables of database '{namespace}'", f"SHOW TABLES IN {_quote(namespace)}")
        names = sorted(str(r["tableName"]) for r in rows if not r["isTemporary"])
        return [self.get_table(namespace, n) for n in names]

    def get_table(self, namespace: str, name: str) -> CatalogTable:
        try:
            rows = self._sql(f"cannot read table '{namespace}.{name}'",
                             f"DESCRIBE TABLE EXTENDED {_quote(namespace)}.{_quote(name)}")
        except CatalogError as e:  # e.g. an Iceberg table without the Iceberg jars: reported, not planned
            return CatalogTable(self.name, namespace, name, None, None, e.message)
        info = {str(r["col_name"]).strip(): str(r["data_type"] or "").strip() for r in rows}
        props = info.get("Table Properties", "")
        location = local_path(info["Location"]) if info.get("Location") else None
        if "TABLE_TYPE=ICEBERG" in props.replace(" ", "").upper():
            return CatalogTable(self.name, namespace, name, location, None,
                                "an Iceberg table: compactor does not plan Iceberg tables yet")
        provider = info.get("Provider", "").lower()
        return by_provider(self.name, namespace, name, provider, location, kind=f"a {provider or 'Hive'} table")
