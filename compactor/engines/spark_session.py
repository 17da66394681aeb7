"""Get a SparkSession for the spark engine: a Spark Connect session to the profile's ``spark.remote``
(compactor/engines/spark_connect.py: no JVM on this machine), else reuse an active one (Databricks,
spark-submit), else one to pyspark's ``SPARK_REMOTE``, else build one from the profile, with the Delta Lake
jars loaded the way users load them (``delta.configure_spark_with_delta_pip``). pyspark is imported only
here and in the spark engine, lazily."""

from __future__ import annotations

import contextlib
import logging
import os
import shutil
import sys
from collections.abc import Iterator, Mapping, Sequence
from typing import TYPE_CHECKING, Any

from compactor.errors import UsageError
from compactor.project.model import SparkSettings

if TYPE_CHECKING:
    from compactor.engines.spark_class_archive import ArchiveUse

log = logging.getLogger(__name__)

#: settings compactor's own writes rely on
REQUIRED_CONF = {
    "spark.sql.parquet.outputTimestampType": "TIMESTAMP_MICROS",
}
#: the driver JVM's options (a class archive's go first: engines/spark_class_archive.py)
JAVA_OPTIONS = "spark.driver.extraJavaOptions"
#: what the Delta jars need in a session (both are static: they must be set before the session starts)
DELTA_CONF = {
    "spark.sql.extensions": "io.delta.sql.DeltaSparkSessionExtension",
    "spark.sql.catalog.spark_catalog": "org.apache.spark.sql.delta.catalog.DeltaCatalog",
}


def _delta_pip_settings(packages: Sequence[str]) -> dict[str, str] | None:
    """What delta-spark's ``configure_spark_with_delta_pip`` sets on a builder (the packages it names), read
    from a builder of its own; None where pyspark's builder does not show its settings."""
    from delta import configure_spark_with_delta_pip
    from pyspark.sql import SparkSession

    options = getattr(configure_spark_with_delta_pip(SparkSession.Builder(), extra_packages=list(packages)),
                      "_options", None)
    return {str(k): str(v) for k, v in options.items()} if isinstance(options, dict) else None


def _builder(master: str, app_name: str, conf: Mapping[str, str], packages: Sequence[str],
             delta: bool) -> tuple[Any, str | None, str | None, bool]:
    """(the builder, the packages it resolves, the key of their resolution, whether the jars of an earlier
    resolution are given instead: engines/spark_jars.py). No packages: (builder, None, None, False)."""
    from pyspark.sql import SparkSession

    from compactor.engines.spark_jars import resolution_key, resolved_jars

    builder = SparkSession.builder.master(master).appName(app_name)
    for k, v in {**(DELTA_CONF if delta else {}), **conf}.items():
        builder = builder.config(k, v)
    wanted = {"spark.jars.packages": ",".join(packages)} if packages else {}
    if delta:  # the Delta jars the way users load them (the packages delta-spark's pip helper names)
        settings = _delta_pip_settings(packages)
        if settings is None:  # resolved at every start, as the helper does
            from delta import configure_spark_with_delta_pip

            return configure_spark_with_delta_pip(builder, extra_packages=list(packages)), None, None, False
        wanted = settings
    for k, v in wanted.items():
        if k != "spark.jars.packages":
            builder = builder.config(k, v)
    resolve = wanted.get("spark.jars.packages")
    if not resolve:
        return builder, None, None, False
    key = resolution_key(resolve, conf)
    jars = resolved_jars(key)
    if jars is not None:
        return builder.config("spark.jars", jars), resolve, key, True
    return builder.config("spark.jars.packages", resolve), resolve, key, False


def _start(master: str, app_name: str, conf: Mapping[str, str], packages: Sequence[str], delta: bool) -> Any:
    """A session from ``_builder``. The jars a new session resolved are remembered for the next one (not
    those of a context this process already had, which may hold other jars); a session that fails to start
    with remembered jars forgets them, so the next start resolves again."""
    from compactor.engines.spark_jars import forget, remember

    builder, resolve, key, remembered = _builder(master, app_name, conf, packages, delta)
    use, user_options = _class_archive(builder)
    try:
        session = builder.getOrCreate()
    except Exception:
        if remembered and key is not None:
            forget(key)
        if not use.options:
            raise
        # the archive may be damaged (a truncated one crashes the JVM): gone, and one start without it
        from compactor.engines.spark_class_archive import failed

        failed(use)
        log.warning("the Spark driver did not start with its class archive (deleted; made again later); "
                    "starting it without")
        session = builder.config(JAVA_OPTIONS, user_options or "").getOrCreate()
    else:
        from compactor.engines.spark_class_archive import started

        started(use, getattr(getattr(session.sparkContext._gateway, "proc", None), "pid", None))
    if remembered and key is not None and delta and not delta_jars_available(session):
        forget(key)  # the remembered jars did not load Delta (changed in place?): the next start resolves
        session.stop()
        raise RuntimeError("the remembered Delta Lake jars did not load; they are resolved again next time")
    got = session.sparkContext.getConf()
    if key is not None and not remembered and got.get("spark.jars.packages", None) == resolve:
        remember(key, got.get("spark.jars", ""))
    return session


def _class_archive(builder: Any) -> tuple[ArchiveUse, str | None]:
    """The class archive a new driver JVM gets (engines/spark_class_archive.py), its options put in the
    builder before the user's own; and the user's own options. Nothing when this process already runs a
    JVM (a new session's Java options would not reach it) or the builder keeps its settings elsewhere."""
    from pyspark import SparkContext

    from compactor.engines.spark_class_archive import NONE, for_session, with_options

    options = getattr(builder, "_options", None)
    if SparkContext._gateway is not None or not isinstance(options, dict):
        return NONE, None
    conf = {str(k): str(v) for k, v in options.items()}
    user = conf.get(JAVA_OPTIONS)
    use = for_session(conf)
    if use.options:
        builder.config(JAVA_OPTIONS, with_options(use, user))
    return use, user


#: where the JVM's own output goes (Ivy resolution, log4j, stage progress): set by the CLI to
#: ``target/spark.log`` unless --debug; unset, the JVM writes to this process's stderr
SPARK_LOG_ENV = "COMPACTOR_SPARK_LOG"


@contextlib.contextmanager
def _jvm_output_to_file() -> Iterator[None]:
    """The JVM inherits file descriptor 2 when it starts: point it at the log file for the launch (the
    JVM keeps it for its lifetime), then give this process its stderr back."""
    path = os.environ.get(SPARK_LOG_ENV)
    if not path:
        yield
        return
    os.makedirs(os.path.dirname(path) or ".", exist_ok=True)
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o644)
    saved = os.dup(2)
    sys.stderr.flush()
    os.dup2(fd, 2)
    try:
        yield
    finally:
        sys.stderr.flush()
        os.dup2(saved, 2)
        os.close(saved)
        os.close(fd)


def build_session(master: str = "local[*]", app_name: str = "compactor", conf: Mapping[str, str] | None = None,
                  *, delta_jars: bool | str = "auto", packages: Sequence[str] = ()) -> Any:
    with _jvm_output_to_file():
        return _build_session(master, app_name, conf, delta_jars=delta_jars, packages=packages)


def _build_session(master: str, app_name: str, conf: Mapping[str, str] | None, *, delta_jars: bool | str,
                   packages: Sequence[str]) -> Any:
    """A new SparkSession (the JVM starts here). ``delta_jars``: "auto" loads the Delta jars when
    delta-spark is installed and Ivy resolves them, else starts without (native OPTIMIZE unavailable,
    the rewrite path still works); True requires them; False never loads them."""
    conf = {"spark.ui.enabled": "false", **dict(conf or {}), **REQUIRED_CONF}
    if os.environ.get(SPARK_LOG_ENV):  # no stage progress bars between compactor's own lines
        conf.setdefault("spark.ui.showConsoleProgress", "false")
    want_delta = delta_jars is True or delta_jars == "auto"
    if want_delta:
        try:
            import delta  # noqa: F401 - the delta-spark wheel
        except ImportError:
            if delta_jars is True:
                raise UsageError("spark.delta_jars is true but delta-spark is not installed",
                                 hint="pip install 'compactor[spark]'") from None
            want_delta = False
    if want_delta:
        try:
            session = _start(master, app_name, conf, packages, True)
        except Exception as e:  # noqa: BLE001 - Ivy failures surface as a JVM launch error
            if delta_jars is True:
                raise UsageError(f"the Delta Lake jars could not be loaded: {str(e).splitlines()[0][:300]}",
                                 hint="check Maven Central access, or set spark.delta_jars: auto") from None
            log.warning("Delta Lake jars could not be loaded (%s); starting Spark without them",
                        str(e).splitlines()[0][:200])
            session = _start(master, app_name, conf, packages, False)
    else:
        session = _start(master, app_name, conf, packages, False)
    session.sparkContext.setLogLevel("ERROR")
    return session


def get_or_create_session(settings: SparkSettings | None = None, *, purpose: str = "compactor") -> Any:
    return open_session(settings or SparkSettings(), purpose=purpose)[0]


def open_session(settings: SparkSettings, *, purpose: str = "compactor") -> tuple[Any, bool]:
    """The session for ``settings`` and whether it was created here (its owner stops it). Over Spark
    Connect (the profile's ``spark.remote``, else pyspark's ``SPARK_REMOTE`` when no session is active)
    nothing looks for Java or starts a JVM. ``purpose``: what the session is for, in the line said before
    a JVM starts ("starting Spark for <purpose> ...", runtime/progress.py) and while it starts."""
    from compactor.engines.spark_connect import connect_session, env_remote
    from compactor.runtime.progress import phase

    try:
        from pyspark.sql import SparkSession
    except ImportError:
        raise UsageError("the spark engine needs pyspark", hint="pip install 'compactor[spark]'") from None
    if settings.remote:
        from compactor.project.model import shown_remote

        with phase(f"connecting to Spark Connect at {shown_remote(settings.remote)} for {purpose}", announce=False):
            return connect_session(settings.remote, settings), True
    active = SparkSession.getActiveSession()
    if active is not None:
        for k, v in REQUIRED_CONF.items():
            active.conf.set(k, v)
        return active, False
    remote = env_remote(settings)
    if remote:
        with phase(f"connecting to Spark Connect (SPARK_REMOTE) for {purpose}", announce=False):
            return connect_session(remote, settings), True
    if shutil.which("java") is None:
        raise UsageError("the spark engine needs Java (none found on PATH)",
                         hint="install a JDK 17 runtime, or reach a running Spark Connect server (spark.remote)")
    master = settings.master or "local[*]"
    with phase(f"starting Spark ({master}) for {purpose}"):
        return build_session(master, settings.app_name, settings.conf, delta_jars=settings.delta_jars,
                             packages=settings.packages), True


def delta_jars_available(spark: Any) -> bool:
    """True when io.delta classes load in this session (native OPTIMIZE/VACUUM possible). Jars from
    spark.jars.packages live in Spark's context class loader, not the system one, so the lookup must go
    through it (a plain Class.forName says "absent" in every pip-installed session). Over Spark Connect
    (no JVM here) the server is asked whether it has Delta's data source."""
    from compactor.engines.spark_connect import delta_source_available, is_connect

    if is_connect(spark):
        return delta_source_available(spark)
    try:
        jvm = spark._jvm
        loader = jvm.java.lang.Thread.currentThread().getContextClassLoader()
        jvm.java.lang.Class.forName("io.delta.tables.DeltaTable", True, loader)
        return True
    except Exception:  # noqa: BLE001 - py4j raises its own error types
        return False


def delta_sql_enabled(spark: Any) -> bool:
    """True when the session can run Delta SQL (OPTIMIZE, VACUUM, DESCRIBE HISTORY): jars loaded and
    the Delta SQL extension configured."""
    if not delta_jars_available(spark):
        return False
    try:
        return "DeltaSparkSessionExtension" in (spark.conf.get("spark.sql.extensions", "") or "")
    except Exception:  # noqa: BLE001
        return False


def resolve_catalog_path(name: str, settings: SparkSettings) -> str:
    """Storage location of a catalog table, for tables identified by name. ``DESCRIBE TABLE
    EXTENDED`` works in every catalog, with or without the Delta jars (DESCRIBE DETAIL needs them)."""
    from compactor.errors import TableReadError

    spark = get_or_create_session(settings, purpose=f"the catalog table '{name}'")
    try:
        rows = spark.sql(f"DESCRIBE TABLE EXTENDED {name}").collect()
    except Exception as e:  # noqa: BLE001 - AnalysisException and friends
        raise TableReadError(f"{name}: cannot resolve catalog table ({str(e).splitlines()[0]})") from None
    for row in rows:
        if (row["col_name"] or "").strip() == "Location":
            loc = row["data_type"]
            return loc[len("file:"):] if loc.startswith("file:/") else loc
    raise TableReadError(f"{name}: the catalog reports no storage location for this table")
