"""Get a SparkSession for the spark engine: reuse an active one (Databricks, spark-submit), else build
one from the profile. pyspark is imported only here and in the spark engine, lazily."""

from __future__ import annotations

import logging
import shutil
from typing import Any

from compactor.errors import UsageError
from compactor.project.model import SparkSettings

log = logging.getLogger(__name__)

#: settings compactor's own writes rely on
REQUIRED_CONF = {
    "spark.sql.parquet.outputTimestampType": "TIMESTAMP_MICROS",
}


def get_or_create_session(settings: SparkSettings | None = None) -> Any:
    settings = settings or SparkSettings()
    try:
        from pyspark.sql import SparkSession
    except ImportError:
        raise UsageError("the spark engine needs pyspark", hint="pip install 'compactor[spark]'") from None
    active = SparkSession.getActiveSession()
    if active is not None:
        for k, v in REQUIRED_CONF.items():
            active.conf.set(k, v)
        return active
    if shutil.which("java") is None:
        raise UsageError("the spark engine needs Java (none found on PATH)", hint="install a JDK 17 runtime")
    builder = SparkSession.builder.master(settings.master or "local[*]").appName(settings.app_name)
    conf = {"spark.ui.enabled": "false", **dict(settings.conf), **REQUIRED_CONF}
    for k, v in conf.items():
        builder = builder.config(k, v)
    session = builder.getOrCreate()
    session.sparkContext.setLogLevel("ERROR")
    return session


def delta_jars_available(spark: Any) -> bool:
    """True when io.delta classes load in this session's JVM (native OPTIMIZE/VACUUM possible)."""
    try:
        spark._jvm.java.lang.Class.forName("io.delta.tables.DeltaTable")
        return True
    except Exception:  # noqa: BLE001 - py4j raises its own error types
        return False


def resolve_catalog_path(name: str, settings: SparkSettings) -> str:
    """Storage location of a catalog table, for tables identified by name. ``DESCRIBE TABLE
    EXTENDED`` works in every catalog, with or without the Delta jars (DESCRIBE DETAIL needs them)."""
    from compactor.errors import TableReadError

    spark = get_or_create_session(settings)
    try:
        rows = spark.sql(f"DESCRIBE TABLE EXTENDED {name}").collect()
    except Exception as e:  # noqa: BLE001 - AnalysisException and friends
        raise TableReadError(f"{name}: cannot resolve catalog table ({str(e).splitlines()[0]})") from None
    for row in rows:
        if (row["col_name"] or "").strip() == "Location":
            loc = row["data_type"]
            return loc[len("file:"):] if loc.startswith("file:/") else loc
    raise TableReadError(f"{name}: the catalog reports no storage location for this table")
