"""The table formats compactor knows, as data: the one registry of formats.

A format's code lives in its own folder under ``compactor/formats/`` (its ``FORMAT``, a TableFormat, and
the module of its own plan words: action types, skip reasons, blocker kinds); everything else that differs
between formats is a trait here, read by the layers that must not import a format's code (policy
validation, plan integrity, the schemas' ``format`` enums). Adding a format is a new folder under
``formats/`` plus one ``FormatSpec`` line below.
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class FormatSpec:
    """One table format: its name, the module of its code, and the traits the other layers read."""

    #: the name policies and plans use
    name: str
    #: the module whose ``FORMAT`` is the format's TableFormat (imported on first use)
    module: str
    #: the folder that marks a table of this format (discover, debug)
    marker: str
    #: the module of the format's own plan words (its action types, skip reasons, blocker kinds), which
    #: registers them when imported (compactor/planning/vocabulary.py imports it when one is first met)
    actions: str
    #: compaction strategies a policy may choose
    strategies: frozenset[str] = frozenset({"bin_pack", "z_order", "sort"})
    #: the policy's ``retention:`` block (the retention of deleted files and of the log) applies
    retention: bool = True
    #: the policy's ``sink:`` block applies (a Structured Streaming file sink); every policy has one
    sink_settings: bool = False
    #: a policy may name the table by a catalog name instead of a path
    catalog_tables: bool = False
    #: planned paths may be absolute URIs (a sink manifest lists files by location)
    absolute_paths: bool = False
    #: the table providers a catalog registers tables of this format under (Spark's
    #: ``spark.sql.sources.provider``, lower case)
    catalog_providers: frozenset[str] = frozenset()


FORMATS: tuple[FormatSpec, ...] = (
    FormatSpec("delta", "compactor.formats.delta", "_delta_log", "compactor.formats.delta.actions",
               catalog_tables=True, catalog_providers=frozenset({"delta"})),
    FormatSpec("spark_file_sink", "compactor.formats.file_sink", "_spark_metadata",
               "compactor.formats.file_sink.actions", strategies=frozenset({"bin_pack"}),
               retention=False, sink_settings=True, absolute_paths=True),
)
FORMAT_NAMES = tuple(f.name for f in FORMATS)
DEFAULT_FORMAT = FORMATS[0].name


def format_spec(name: str) -> FormatSpec | None:
    return next((f for f in FORMATS if f.name == name), None)


def format_for_provider(provider: str) -> FormatSpec | None:
    """The format a catalog's table provider (``delta``) is planned as; None: no format compactor plans."""
    p = provider.strip().lower()
    return next((f for f in FORMATS if p in f.catalog_providers), None)
