"""A table's reference: where it lives (its URI and the storage options that reach it, held together once,
as a table library's table handle holds both) and, for a table a catalog names, that catalog and the
table's identifier in it. Every method of a format's interface takes one.

A format whose tables are read and committed by location uses the location alone; a format whose tables
are committed through a catalog reaches the catalog from the reference: ``identifier`` names the table in
it, ``catalog`` holds that catalog's settings (its type and client options, from the target's
``catalogs:``).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field

from compactor.models.catalog import CatalogSettings


@dataclass(frozen=True)
class TableIdentifier:
    """A table by its name in a catalog of the target: ``catalog.namespace.table`` (``catalog``: the name of
    the target's ``catalogs:`` entry)."""

    catalog: str
    namespace: str
    table: str

    def __str__(self) -> str:
        return f"{self.catalog}.{self.namespace}.{self.table}"

    def to_dict(self) -> dict[str, str]:
        return {"catalog": self.catalog, "namespace": self.namespace, "table": self.table}


@dataclass(frozen=True)
class TableLocation:
    """A table's reference: its URI with the storage options that reach it (``str()`` gives the URI alone)
    and, for a table a catalog names, its identifier there and that catalog's settings."""

    #: a local path or an object-store URI (s3://, az://, gs://, ...)
    uri: str
    #: the target's storage options (object_store's keys: runtime/storage/options.py); never in repr, logs or errors
    storage_options: Mapping[str, str] = field(default_factory=dict, repr=False)
    #: the table's name in a catalog of the target (None: a table known by its location alone)
    identifier: TableIdentifier | None = None
    #: the settings of the catalog ``identifier`` names (its type and client options: secrets, never in
    #: repr), so a format that commits through the catalog can open it; None when the target declares no
    #: such catalog (or the table has no identifier)
    catalog: CatalogSettings | None = field(default=None, repr=False, compare=False)

    def __str__(self) -> str:
        return self.uri


def table_ref(uri: str, storage_options: Mapping[str, str] | None = None,
              identifier: TableIdentifier | None = None,
              catalogs: Mapping[str, CatalogSettings] | None = None) -> TableLocation:
    """The reference of the table at ``uri``, named ``identifier`` in one of ``catalogs`` (a target's
    ``catalogs:``, by name), that catalog's settings included."""
    settings = (catalogs or {}).get(identifier.catalog) if identifier is not None else None
    return TableLocation(uri, storage_options or {}, identifier, settings)
