"""Delta Lake in a Spark session: what its tables need of one (the delta-spark jars the way users load
them, ``configure_spark_with_delta_pip``, Delta's SQL extension and catalog), whether a session runs Delta
SQL, and the VACUUM compactor runs through the spark engine's neutral primitives (``SqlEngine``:
formats/delta/apply/context.py). The engine knows none of it: the session builder is handed ``spark_needs``."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import replace
from typing import TYPE_CHECKING, Any

from compactor.engines.spark_needs import SparkNeeds
from compactor.errors import UsageError
from compactor.formats.delta.spark_sql import INVENTORY_SCHEMA, vacuum_sql

if TYPE_CHECKING:  # pragma: no cover
    from compactor.engines.sql_engine import SqlEngine

#: what the Delta jars need in a session (both are static: they must be set before the session starts)
DELTA_CONF = (
    ("spark.sql.extensions", "io.delta.sql.DeltaSparkSessionExtension"),
    ("spark.sql.catalog.spark_catalog", "org.apache.spark.sql.delta.catalog.DeltaCatalog"),
)
#: Delta Lake's needs of a session, but for the packages (``spark_needs`` asks delta-spark for them)
DELTA = SparkNeeds(
    "Delta Lake", conf=DELTA_CONF, jvm_class="io.delta.tables.DeltaTable",
    sql_extension="io.delta.sql.DeltaSparkSessionExtension", data_source="delta", setting="spark.delta_jars",
    hint="check Maven Central access, or set spark.delta_jars: auto",
    connect_hint="start the server with io.delta:delta-spark and Delta's two confs, or set spark.delta_jars: auto")
#: how many tasks Delta's VACUUM lists a table in, and that number in a local session where it is unset
LISTING_TASKS = "spark.sql.sources.parallelPartitionDiscovery.parallelism"
LOCAL_LISTING_TASKS = 8


def _delta_pip_settings(packages: Sequence[str] = ()) -> dict[str, str] | None:
    """What delta-spark's ``configure_spark_with_delta_pip`` sets on a builder (the packages it names), read
    from a builder of its own; None where pyspark's builder does not show its settings."""
    from delta import configure_spark_with_delta_pip
    from pyspark.sql import SparkSession

    options = getattr(configure_spark_with_delta_pip(SparkSession.Builder(), extra_packages=list(packages)),
                      "_options", None)
    return {str(k): str(v) for k, v in options.items()} if isinstance(options, dict) else None


def _recorded_pip_settings() -> dict[str, str]:
    """What the helper sets, recorded from its calls of ``config`` (for a builder that does not show its
    settings)."""
    from delta import configure_spark_with_delta_pip
    from pyspark.sql import SparkSession

    builder = SparkSession.Builder()
    seen: dict[str, str] = {}

    def record(key: Any = None, value: Any = None, *args: Any, **kwargs: Any) -> Any:
        seen[str(key)] = str(value)
        return builder

    setattr(builder, "config", record)  # noqa: B010 - the helper requires the builder's own type
    configure_spark_with_delta_pip(builder)
    return seen


def spark_needs(delta_jars: bool | str, loads: bool) -> tuple[SparkNeeds, ...]:
    """What a session needs for Delta tables under the profile's ``spark.delta_jars``: "auto" loads the jars
    when delta-spark is installed and Ivy resolves them, else the session starts without them (native
    OPTIMIZE unavailable, the rewrite path still works); True requires them; False never loads them.
    ``loads``: whether this process starts the session (the packages are asked of delta-spark then);
    otherwise (Spark Connect) the server is only checked."""
    if delta_jars is False:
        return ()
    required = delta_jars is True
    if not loads:
        return (replace(DELTA, required=required),)
    try:
        import delta  # noqa: F401 - the delta-spark wheel
    except ImportError:
        if required:
            raise UsageError("spark.delta_jars is true but delta-spark is not installed",
                             hint="pip install 'compactor[spark]'") from None
        return ()
    settings = _delta_pip_settings() or _recorded_pip_settings()
    packages = tuple(p for p in settings.pop("spark.jars.packages", "").split(",") if p)
    return (replace(DELTA, packages=packages, conf=DELTA_CONF + tuple(settings.items()), required=required),)


def build_session(master: str = "local[*]", app_name: str = "compactor", conf: Mapping[str, str] | None = None,
                  *, delta_jars: bool | str = "auto", packages: Sequence[str] = ()) -> Any:
    """A new SparkSession with Delta Lake as ``spark_needs`` asks (tests, benchmarks and scripts/test start
    theirs so)."""
    from compactor.engines.spark_session import build_session as build

    return build(master, app_name, conf, needs=spark_needs(delta_jars, True), packages=packages)


def delta_sql_enabled(spark: Any) -> bool:
    """True when the session can run Delta SQL (OPTIMIZE, VACUUM, DESCRIBE HISTORY): jars loaded and the
    Delta SQL extension configured."""
    from compactor.engines.spark_session import session_provides

    return session_provides(spark, DELTA)


def delta_jars_available(spark: Any) -> bool:
    """True when the Delta classes load in this session (over Spark Connect: the server has Delta's data
    source and SQL extension)."""
    from compactor.engines.spark_session import jars_loaded

    return jars_loaded(spark, DELTA)


def delta_sql_available(engine: SqlEngine) -> bool:
    """Whether the engine's session runs Delta SQL (asked once per engine; over Spark Connect, of the
    server: ``delta_jars: false`` says never)."""
    if engine.settings.delta_jars is False and engine.is_spark_connect():
        return False
    return engine.provides(DELTA)


def native_commits_safe(engine: SqlEngine, uri: str) -> bool:
    """Whether delta-spark commits to ``uri`` safely against concurrent writers. Not on S3 with open-source
    delta-spark's default log store (S3SingleDriverLogStore: mutual exclusion only inside one JVM), unless
    the session configures a log store (e.g. S3DynamoDBLogStore) or runs on Databricks; compactor then
    rewrites and commits through delta-rs, whose commits are create-if-absent PUTs."""
    if not uri.startswith(("s3://", "s3a://", "s3n://")):
        return True
    keys = ("spark.delta.logStore.s3.impl", "spark.delta.logStore.s3a.impl", "spark.delta.logStore.class",
            "spark.databricks.clusterUsageTags.clusterId")
    return any(engine.setting(k) for k in keys)


def listing_conf(engine: SqlEngine) -> dict[str, str]:
    """The settings of a VACUUM's listing: Delta lists the table in LISTING_TASKS tasks (10,000 by default:
    41-66 s for a table of two folders on local[2], 6-7 s with 8); in a local session where that is unset,
    in LOCAL_LISTING_TASKS."""
    if not engine.local_master():
        return {}
    return {LISTING_TASKS: str(LOCAL_LISTING_TASKS)} if engine.setting(LISTING_TASKS) is None else {}


def vacuum_listing(engine: SqlEngine, path: str, retention_hours: int) -> list[str]:
    """What Delta's VACUUM would delete now, as its dry run names it (``listing_conf`` for its duration,
    the session's own settings restored after)."""
    with engine.session_conf(listing_conf(engine)):
        return [str(r[0]) for r in engine.sql(vacuum_sql(path, retention_hours, True))]


def vacuum_files(engine: SqlEngine, path: str, retention_hours: int, files: Sequence[tuple[str, int, float]]) -> None:
    """Delta's VACUUM of ``path`` considering only ``files`` (each: its name as Delta's dry run gave it, its
    size, its modification time in seconds) instead of a listing of the table: Delta deletes those of them
    it finds deletable now (untracked or removed, older than the retention, by a snapshot it reads now),
    and no other file."""
    rows = [(name, int(size), False, int(mtime * 1000)) for name, size, mtime in files]
    with engine.temp_view(rows, INVENTORY_SCHEMA) as view:
        engine.sql(vacuum_sql(path, retention_hours, False,
                              inventory=f"SELECT path, length, isDir, modificationTime FROM {view}"))
