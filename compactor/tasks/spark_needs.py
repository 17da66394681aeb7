"""What a Spark session needs for the tables a command touches: each table format declares its own
(``TableFormat.spark_needs``: its jars and SQL settings, or nothing), gathered here
for the code that opens a session (the spark engine, a catalog's lookups), which knows no format."""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from importlib import import_module

from compactor.engines.spark_needs import NeedsSource, SparkNeeds
from compactor.formats import FORMAT_NAMES, get_format
from compactor.project.model import SparkSettings


def needs_of(formats: Iterable[str], spark: SparkSettings) -> NeedsSource:
    """The needs of tables of ``formats`` under the profile's ``spark`` settings, asked for when a session
    starts (a format's own checks, such as a required package, fail then, not before)."""
    names = tuple(dict.fromkeys(formats))

    def needs(loads: bool) -> tuple[SparkNeeds, ...]:
        return tuple(n for name in names for n in get_format(name).spark_needs(spark, loads))

    return needs


def any_format(spark: SparkSettings) -> NeedsSource:
    """The needs of every format: a session that may meet a table of any of them (a catalog names tables
    of several formats, and the engine reuses the session the lookup started)."""
    return needs_of(FORMAT_NAMES, spark)


def library_versions(formats: Iterable[str]) -> Mapping[str, str]:
    """The versions of the Python libraries ``formats`` read and commit through (run results): each module's
    ``__version__`` (the format has imported it by then)."""
    out = {}
    for name in dict.fromkeys(formats):
        for lib in get_format(name).libraries:
            out[lib] = str(getattr(import_module(lib), "__version__", "unknown"))
    return out
