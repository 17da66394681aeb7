"""Tables a catalog names: where each lives and in which format (the catalogs in a profile's target)."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field

#: catalog types (profiles.yml ``catalogs: {NAME: {type: ...}}``) and the option keys each accepts
CATALOG_TYPES: dict[str, frozenset[str]] = {
    "glue": frozenset({"region", "endpoint_url", "catalog_id", "profile", "aws_access_key_id",
                       "aws_secret_access_key", "aws_session_token"}),
    "hive": frozenset({"metastore_uris", "metastore_db", "warehouse", "hive2_compatible"}),
    "unity": frozenset({"host", "token", "catalog"}),
    # table catalogs of one open table spec, no JVM: tables in a SQL database (a SQLAlchemy URL), a REST server
    "sql": frozenset({"uri", "warehouse"}),
    "rest": frozenset({"uri", "warehouse", "credential", "token", "scope", "prefix", "oauth2-server-uri"}),
}


@dataclass(frozen=True)
class CatalogSettings:
    """One entry of a target's ``catalogs:`` (profiles.yml): its name, its type, and the options its client
    takes (region, endpoint_url, credentials through env_var; never printed or saved)."""

    name: str
    #: glue, hive, unity, sql or rest (each opens in compactor/catalogs/__init__.py)
    type: str
    options: Mapping[str, str] = field(default_factory=dict, repr=False)


@dataclass(frozen=True)
class CatalogTable:
    """A table as its catalog registers it. ``format``: the compactor format that plans it (None: a format
    compactor does not plan, ``reason`` says which and why)."""

    catalog: str
    namespace: str
    name: str
    location: str | None
    format: str | None
    reason: str = ""

    @property
    def qualified_name(self) -> str:
        return f"{self.catalog}.{self.namespace}.{self.name}"
