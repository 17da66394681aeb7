"""The table formats compactor knows, as data: the one registry of formats.

A format's code lives in its own folder under ``compactor/formats/`` (its ``FORMAT``, a TableFormat; the
module of its own plan words: action types, skip reasons, blocker kinds; and the module of its detection:
``detect(folder)``); everything else that differs between formats is a trait here, read by the layers that
must not import a format's code (policy validation, plan integrity, the crash journal, the schemas'
``format`` enums). Adding a format is a new folder under ``formats/`` plus one ``FormatSpec`` line below;
code outside the package (a test's format, a plugin) adds one with ``register_format(spec)``.

``FORMATS`` and ``FORMAT_NAMES`` are live views of the registry: a module that imported them sees a format
registered later. What is computed from the registry and kept (a schema with its ``format`` enum, the
reserved folders) is keyed by ``generation()``, which every registration changes.
"""

from __future__ import annotations

import threading
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from typing import Protocol, overload


class Folder(Protocol):
    """One folder as a format's detection sees it: whether a sub-folder or a file of a given name is
    directly in it. Discover answers from the one listing it made of the folder (``FolderListing``); a
    single path is asked name by name (one small request each on an object store)."""

    def has_folder(self, name: str) -> bool: ...

    def has_file(self, name: str) -> bool: ...


@dataclass(frozen=True)
class FolderListing:
    """A folder's direct entries, as one listing returned them (the ``Folder`` discover hands each format)."""

    folders: frozenset[str]
    files: frozenset[str]

    def has_folder(self, name: str) -> bool:
        return name in self.folders

    def has_file(self, name: str) -> bool:
        return name in self.files


@dataclass(frozen=True)
class FormatSpec:
    """One table format: its name, the modules of its code, and the traits the other layers read."""

    #: the name policies and plans use
    name: str
    #: the module whose ``FORMAT`` is the format's TableFormat (imported on first use)
    module: str
    #: the module of the format's own plan words (its action types, skip reasons, blocker kinds), which
    #: registers them when imported (compactor/planning/vocabulary.py imports it when one is first met)
    actions: str
    #: the module whose ``detect(folder: Folder) -> str | None`` says whether ``folder`` is the root of a
    #: table of this format, from the folder's entries alone (no read of any file: discover asks it of
    #: every folder it lists), as what makes it one (``"_delta_log"``), for messages; None: it is not.
    #: Imported by discover (formats/discover.py), so as light as it can be
    detect: str
    #: the entries at a table's root that hold the format's own metadata (its log, its manifest): no
    #: action may name a file in them, no crash-journal entry a path
    metadata: tuple[str, ...]
    #: formats whose claim on the same folder wins over this one's when a bare path is detected (a table
    #: one format writes may keep another's metadata beside its own log, for that format's readers). Two
    #: formats claiming one folder, neither yielding, is an error naming both (formats/discover.py)
    yields_to: frozenset[str] = frozenset()
    #: compaction strategies a policy may choose
    strategies: frozenset[str] = frozenset({"bin_pack", "z_order", "sort"})
    #: the policy's ``retention:`` block applies
    retention: bool = True
    #: the keys of the ``retention:`` block that are this format's own (YAML keys users write): a key some
    #: format owns is an error on a table of any other format; a key no format owns (``allow_unsafe_retention``,
    #: ``min_reader_lag``) applies to every format whose tables take the block
    retention_keys: frozenset[str] = frozenset()
    #: the keys of ``compaction.triggers`` that are this format's own, as ``retention_keys``
    trigger_keys: frozenset[str] = frozenset()
    #: the keys of the ``compaction:`` block that are this format's own (its own maintenance, as YAML keys):
    #: such a key on a table of any other format is a policy error
    compaction_keys: frozenset[str] = frozenset()
    #: the policy's ``sink:`` block applies (a Structured Streaming file sink); every policy has one
    sink_settings: bool = False
    #: a policy may name the table by a catalog name instead of a path
    catalog_tables: bool = False
    #: planned paths may be absolute URIs (a sink manifest lists files by location)
    absolute_paths: bool = False
    #: the table providers a catalog registers tables of this format under (Spark's
    #: ``spark.sql.sources.provider``, lower case)
    catalog_providers: frozenset[str] = frozenset()
    #: a table of this format is named by a catalog of the target (a policy's ``catalog:``, or a discover
    #: over a catalog), never by a path alone: the format reads and commits through that catalog
    catalog_only: bool = False
    #: a ``catalog_only`` format's table may still be named by ``path`` for planning only: read from its own
    #: metadata files; apply refuses it (its format commits through a catalog)
    path_planning: bool = False


BUILT_IN: tuple[FormatSpec, ...] = (
    FormatSpec("delta", "compactor.formats.delta", "compactor.formats.delta.plan.actions",
               "compactor.formats.delta.probe", ("_delta_log",),
               retention_keys=frozenset({"deleted_file_retention", "log_retention", "vacuum", "manage_properties"}),
               trigger_keys=frozenset({"max_deleted_rows_ratio"}), compaction_keys=frozenset({"purge"}),
               catalog_tables=True, catalog_providers=frozenset({"delta"})),
    FormatSpec("spark_file_sink", "compactor.formats.file_sink", "compactor.formats.file_sink.actions",
               "compactor.formats.file_sink.probe", ("_spark_metadata",), strategies=frozenset({"bin_pack"}),
               retention=False, sink_settings=True, absolute_paths=True),
    FormatSpec("iceberg", "compactor.formats.iceberg", "compactor.formats.iceberg.actions",
               "compactor.formats.iceberg.probe", ("metadata",), yields_to=frozenset({"delta"}),
               strategies=frozenset({"bin_pack"}), retention_keys=frozenset({"expire_snapshots", "remove_orphan_files"}),
               trigger_keys=frozenset({"max_deleted_rows_ratio", "delete_file_threshold"}),
               compaction_keys=frozenset({"position_deletes", "manifests"}), absolute_paths=True, catalog_only=True,
               path_planning=True, catalog_providers=frozenset({"iceberg"})),
)

_lock = threading.Lock()
_specs: list[FormatSpec] = list(BUILT_IN)
_generation = 0


def generation() -> int:
    """Changes whenever a format is registered or unregistered: the key of what is computed from the registry."""
    return _generation


class _Specs(Sequence[FormatSpec]):
    """The registered formats, in registration order (the built-in ones first): a live view."""

    @overload
    def __getitem__(self, i: int) -> FormatSpec: ...

    @overload
    def __getitem__(self, i: slice) -> Sequence[FormatSpec]: ...

    def __getitem__(self, i: int | slice) -> FormatSpec | Sequence[FormatSpec]:
        return tuple(_specs)[i]

    def __len__(self) -> int:
        return len(_specs)

    def __iter__(self) -> Iterator[FormatSpec]:
        return iter(tuple(_specs))

    def __repr__(self) -> str:
        return f"FORMATS{tuple(s.name for s in _specs)}"


class _Names(Sequence[str]):
    """The names of the registered formats: a live view."""

    @overload
    def __getitem__(self, i: int) -> str: ...

    @overload
    def __getitem__(self, i: slice) -> Sequence[str]: ...

    def __getitem__(self, i: int | slice) -> str | Sequence[str]:
        return tuple(s.name for s in _specs)[i]

    def __len__(self) -> int:
        return len(_specs)

    def __iter__(self) -> Iterator[str]:
        return iter(tuple(s.name for s in _specs))

    def __repr__(self) -> str:
        return f"FORMAT_NAMES{tuple(self)}"


FORMATS: Sequence[FormatSpec] = _Specs()
FORMAT_NAMES: Sequence[str] = _Names()
DEFAULT_FORMAT = BUILT_IN[0].name


def format_spec(name: str) -> FormatSpec | None:
    return next((f for f in _specs if f.name == name), None)


def format_for_provider(provider: str) -> FormatSpec | None:
    """The format a catalog's table provider (``delta``) is planned as; None: no format compactor plans."""
    p = provider.strip().lower()
    return next((f for f in _specs if p in f.catalog_providers), None)


_metadata: tuple[int, tuple[str, ...]] = (-1, ())


def metadata_names() -> tuple[str, ...]:
    """Every registered format's metadata entries (``FormatSpec.metadata``) and compactor's own folder,
    sorted: the names no action and no crash-journal entry may name a path in (kept per ``generation()``:
    plan integrity asks this for every planned path)."""
    global _metadata
    gen, names = _metadata
    if gen != _generation:
        names = tuple(sorted({*(m for f in _specs for m in f.metadata), "_compactor"}))
        _metadata = (_generation, names)
    return names


class Registration:
    """A format added by ``register_format``: ``close()`` (or leaving its ``with`` block) removes it again."""

    def __init__(self, spec: FormatSpec) -> None:
        self.spec = spec

    def close(self) -> None:
        global _generation
        with _lock:
            if self.spec in _specs:
                _specs.remove(self.spec)
                _generation += 1

    def __enter__(self) -> FormatSpec:
        return self.spec

    def __exit__(self, *exc: object) -> None:
        self.close()


def register_format(spec: FormatSpec) -> Registration:
    """Add a format from outside this module (a test's own format, a plugin): from now on every layer reads
    it as it reads the built-in ones. Returns the registration: a context manager, or ``close()`` it (a
    pytest fixture's teardown). A name already registered is a ValueError."""
    global _generation
    problems = [f"{what} is empty" for what, v in (("name", spec.name), ("module", spec.module),
                                                    ("actions", spec.actions), ("detect", spec.detect)) if not v]
    if not spec.metadata:
        problems.append("metadata names no entry (the folder or file holding the format's own metadata)")
    if problems:
        raise ValueError(f"format {spec.name!r}: " + "; ".join(problems))
    with _lock:
        if any(f.name == spec.name for f in _specs):
            raise ValueError(f"format {spec.name!r} is already registered")
        _specs.append(spec)
        _generation += 1
    return Registration(spec)
