"""Get a SparkSession for the spark engine: a Spark Connect session to the profile's ``spark.remote``
(compactor/engines/spark_connect.py: no JVM on this machine), else reuse an active one (Databricks,
spark-submit), else one to pyspark's ``SPARK_REMOTE``, else build one from the profile, with what the run's
table formats need of it (engines/spark_needs.py: their jars through Ivy, their static settings).
pyspark is imported only here and in the spark engine, lazily."""

from __future__ import annotations

import contextlib
import logging
import os
import shutil
import sys
from collections.abc import Iterator, Mapping, Sequence
from typing import TYPE_CHECKING, Any

from compactor.engines.spark_needs import REQUIRED_CONF, NeedsSource, SparkNeeds, extension_listed, no_needs
from compactor.errors import UsageError
from compactor.project.model import SparkSettings

if TYPE_CHECKING:
    from compactor.engines.spark_class_archive import ArchiveUse

log = logging.getLogger(__name__)

#: the driver JVM's options (a class archive's go first: engines/spark_class_archive.py)
JAVA_OPTIONS = "spark.driver.extraJavaOptions"


#: a list setting: each format's SQL extension joins it
EXTENSIONS = "spark.sql.extensions"


def _builder(master: str, app_name: str, conf: Mapping[str, str], packages: Sequence[str],
             needs: Sequence[SparkNeeds]) -> tuple[Any, str | None, str | None, bool]:
    """(the builder, the packages it resolves, the key of their resolution, whether the jars of an earlier
    resolution are given instead: engines/spark_jars.py). No packages: (builder, None, None, False). The
    needs' packages come first, then the profile's: the order a format's own pip helper gives them."""
    from pyspark.sql import SparkSession

    from compactor.engines.spark_jars import resolution_key, resolved_jars

    builder = SparkSession.builder.master(master).appName(app_name)
    settings = {**{k: v for n in needs for k, v in n.conf}, **conf}
    listed = [e for source in (*(dict(n.conf) for n in needs), conf) for e in source.get(EXTENSIONS, "").split(",")]
    if any(listed):  # every format's SQL extension (and the profile's), each once, in the order given
        settings[EXTENSIONS] = ",".join(dict.fromkeys(e.strip() for e in listed if e.strip()))
    for k, v in settings.items():
        builder = builder.config(k, v)
    resolve = ",".join([p for n in needs for p in n.packages] + list(packages))
    if not resolve:
        return builder, None, None, False
    key = resolution_key(resolve, conf)
    jars = resolved_jars(key)
    if jars is not None:
        return builder.config("spark.jars", jars), resolve, key, True
    return builder.config("spark.jars.packages", resolve), resolve, key, False


def _start(master: str, app_name: str, conf: Mapping[str, str], packages: Sequence[str],
           needs: Sequence[SparkNeeds]) -> Any:
    """A session from ``_builder``. The jars a new session resolved are remembered for the next one (not
    those of a context this process already had, which may hold other jars); a session that fails to start
    with remembered jars forgets them, so the next start resolves again."""
    from compactor.engines.spark_jars import forget, remember

    builder, resolve, key, remembered = _builder(master, app_name, conf, packages, needs)
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
    if remembered and key is not None and not all(classes_load(session, n) for n in needs):
        forget(key)  # the remembered jars did not load what they should (changed in place?): resolved next time
        session.stop()
        raise RuntimeError(f"the remembered {_names(needs)} jars did not load; they are resolved again next time")
    got = session.sparkContext.getConf()
    if key is not None and not remembered and got.get("spark.jars.packages", None) == resolve:
        remember(key, got.get("spark.jars", ""))
    return session


def _names(needs: Sequence[SparkNeeds]) -> str:
    return " and ".join(n.name for n in needs)


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
                  *, needs: Sequence[SparkNeeds] = (), packages: Sequence[str] = ()) -> Any:
    with _jvm_output_to_file():
        return _build_session(master, app_name, conf, needs=needs, packages=packages)


def _build_session(master: str, app_name: str, conf: Mapping[str, str] | None, *, needs: Sequence[SparkNeeds],
                   packages: Sequence[str]) -> Any:
    """A new SparkSession (the JVM starts here) with ``needs`` loaded. When they cannot be (Ivy fails, or
    remembered jars do not load), a required one fails the start; otherwise the session starts without
    them, with a warning (the format's SQL is then unavailable; compactor's rewrite still works)."""
    conf = {"spark.ui.enabled": "false", **dict(conf or {}), **REQUIRED_CONF}
    if os.environ.get(SPARK_LOG_ENV):  # no stage progress bars between compactor's own lines
        conf.setdefault("spark.ui.showConsoleProgress", "false")
    if not needs:
        session = _start(master, app_name, conf, packages, ())
    else:
        try:
            session = _start(master, app_name, conf, packages, needs)
        except Exception as e:  # noqa: BLE001 - Ivy failures surface as a JVM launch error
            required = next((n for n in needs if n.required), None)
            if required is not None:
                raise UsageError(f"the {required.name} jars could not be loaded: {str(e).splitlines()[0][:300]}",
                                 hint=required.hint) from None
            log.warning("%s jars could not be loaded (%s); starting Spark without them", _names(needs),
                        str(e).splitlines()[0][:200])
            session = _start(master, app_name, conf, packages, ())
    session.sparkContext.setLogLevel("ERROR")
    return session


def get_or_create_session(settings: SparkSettings | None = None, *, needs: NeedsSource = no_needs,
                          purpose: str = "compactor") -> Any:
    return open_session(settings or SparkSettings(), needs=needs, purpose=purpose)[0]


def open_session(settings: SparkSettings, *, needs: NeedsSource = no_needs,
                 purpose: str = "compactor") -> tuple[Any, bool]:
    """The session for ``settings`` and whether it was created here (its owner stops it); a new one with
    what ``needs`` gives (spark_needs.py). Over Spark Connect (the profile's ``spark.remote``, else
    pyspark's ``SPARK_REMOTE`` when no session is active) nothing looks for Java or starts a JVM, and the
    server is checked for the required needs. ``purpose``: what the session is for, in the line said before
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
            return connect_session(settings.remote, settings, needs(False)), True
    active = SparkSession.getActiveSession()
    if active is not None:
        for k, v in REQUIRED_CONF.items():
            active.conf.set(k, v)
        return active, False
    remote = env_remote(settings)
    if remote:
        with phase(f"connecting to Spark Connect (SPARK_REMOTE) for {purpose}", announce=False):
            return connect_session(remote, settings, needs(False)), True
    if shutil.which("java") is None:
        raise UsageError("the spark engine needs Java (none found on PATH)",
                         hint="install a JDK 17 runtime, or reach a running Spark Connect server (spark.remote)")
    master = settings.master or "local[*]"
    with phase(f"starting Spark ({master}) for {purpose}"):
        return build_session(master, settings.app_name, settings.conf, needs=needs(True),
                             packages=settings.packages), True


def classes_load(spark: Any, needs: SparkNeeds) -> bool:
    """Whether the session's JVM loads ``needs.jvm_class`` (True when it names none). Jars from
    spark.jars.packages live in Spark's context class loader, not the system one, so the lookup must go
    through it (a plain Class.forName says "absent" in every pip-installed session)."""
    if needs.jvm_class is None:
        return True
    try:
        jvm = spark._jvm
        loader = jvm.java.lang.Thread.currentThread().getContextClassLoader()
        jvm.java.lang.Class.forName(needs.jvm_class, True, loader)
        return True
    except Exception:  # noqa: BLE001 - py4j raises its own error types
        return False


def jars_loaded(spark: Any, needs: SparkNeeds) -> bool:
    """Whether the session has the jars of ``needs``: their class loads; over Spark Connect (no JVM here)
    the server is asked (its SQL extension configured and its data source resolvable)."""
    from compactor.engines.spark_connect import is_connect, source_available

    if is_connect(spark):
        return source_available(spark, needs)
    return classes_load(spark, needs)


def extension_configured(spark: Any, needs: SparkNeeds) -> bool:
    """Whether the session's ``spark.sql.extensions`` names the SQL extension of ``needs`` (True when it
    needs none)."""
    try:
        return extension_listed(needs, spark.conf.get("spark.sql.extensions", ""))
    except Exception:  # noqa: BLE001
        return False


def session_provides(spark: Any, needs: SparkNeeds) -> bool:
    """Whether the session runs the SQL of the format that declared ``needs``: its jars loaded and its SQL
    extension configured."""
    return jars_loaded(spark, needs) and extension_configured(spark, needs)


def resolve_catalog_path(name: str, settings: SparkSettings, needs: NeedsSource = no_needs) -> str:
    """Storage location of a catalog table, for tables identified by name. ``DESCRIBE TABLE
    EXTENDED`` works in every catalog, whatever jars the session has (a format's own DESCRIBE may not)."""
    from compactor.errors import TableReadError

    spark = get_or_create_session(settings, needs=needs, purpose=f"the catalog table '{name}'")
    try:
        rows = spark.sql(f"DESCRIBE TABLE EXTENDED {name}").collect()
    except Exception as e:  # noqa: BLE001 - AnalysisException and friends
        raise TableReadError(f"{name}: cannot resolve catalog table ({str(e).splitlines()[0]})") from None
    for row in rows:
        if (row["col_name"] or "").strip() == "Location":
            loc: str = row["data_type"]  # DESCRIBE's data_type column is a string
            return loc[len("file:"):] if loc.startswith("file:/") else loc
    raise TableReadError(f"{name}: the catalog reports no storage location for this table")
