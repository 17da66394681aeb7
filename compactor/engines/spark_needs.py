"""What a table format needs of a Spark session, as data. A format declares it (``TableFormat.spark_needs``:
its jars, SQL extension, catalog); the code that creates the spark engine gathers the needs of the formats
a run touches and hands them over; the session builder (spark_session.py) loads them and tells whether a
session has them. Nothing here names a format."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass

#: settings compactor's own writes rely on, in every session (a local one's and a Spark Connect server's)
REQUIRED_CONF = {
    "spark.sql.parquet.outputTimestampType": "TIMESTAMP_MICROS",
}


@dataclass(frozen=True)
class SparkNeeds:
    """What one table format's tables need of a Spark session."""

    #: who needs it, in messages ("the <name> jars could not be loaded")
    name: str
    #: Maven coordinates Ivy resolves at session start (``spark.jars.packages``), before the profile's own
    packages: tuple[str, ...] = ()
    #: settings that must be set before the session starts (static SQL settings: extensions, catalogs)
    conf: tuple[tuple[str, str], ...] = ()
    #: a JVM class that loads once the jars did (looked up through Spark's context class loader)
    jvm_class: str | None = None
    #: an SQL extension the format's SQL needs configured (``spark.sql.extensions``); its class name is
    #: looked for there, so a package-qualified or a bare entry both count
    sql_extension: str | None = None
    #: a data source a Spark Connect server resolves once it has the jars (``spark.read.format(...)``)
    data_source: str | None = None
    #: True: a session that cannot load them fails to start; False: it starts without them, with a warning
    required: bool = False
    #: the profile setting that asks for them (``<setting> is true but ...``)
    setting: str = ""
    #: what to do when the jars cannot be loaded, and when a Spark Connect server lacks them
    hint: str = ""
    connect_hint: str = ""


#: the needs of a run, asked for when its session starts: ``(True)`` when this process starts the JVM and
#: loads them (their packages are resolved then: a format may raise a UsageError for a need it cannot meet,
#: such as a Python package the profile requires and that is not installed); ``(False)`` when a session is
#: only checked for them (a Spark Connect server has its own jars: nothing is resolved here)
NeedsSource = Callable[[bool], Sequence[SparkNeeds]]


def no_needs(loads: bool) -> Sequence[SparkNeeds]:
    """A run whose tables need nothing of the session."""
    return ()


def extension_listed(needs: SparkNeeds, extensions: str | None) -> bool:
    """Whether ``extensions`` (a session's ``spark.sql.extensions``) names the SQL extension of ``needs`` by
    its class name (True when it needs none)."""
    return needs.sql_extension is None or needs.sql_extension.rsplit(".", 1)[-1] in (extensions or "")
