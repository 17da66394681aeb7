"""AWS Glue through boto3: tables of a Glue database as locations and formats, no JVM.

Spark and Databricks register a Delta table in Glue with ``Parameters["spark.sql.sources.provider"] =
"delta"`` and its location in ``StorageDescriptor.Location`` (or, for a table Spark stored in its own,
non-Hive-compatible way, in ``StorageDescriptor.SerdeInfo.Parameters["path"]``). Iceberg tables carry
``Parameters["table_type"] = "ICEBERG"`` and ``metadata_location``: they are Iceberg tables whatever their
provider says (the Iceberg format reads them through pyiceberg's GlueCatalog, by identifier). A policy of
the Iceberg format reads Glue through pyiceberg itself (catalogs/iceberg_catalogs.py).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from compactor.catalogs.base import by_provider, local_path
from compactor.catalogs.iceberg_catalogs import PROVIDER as ICEBERG
from compactor.errors import CatalogError
from compactor.models.catalog import CatalogSettings, CatalogTable

#: profile keys of a glue catalog -> boto3 client arguments
CLIENT_KEYS = {"region": "region_name", "endpoint_url": "endpoint_url", "aws_access_key_id": "aws_access_key_id",
               "aws_secret_access_key": "aws_secret_access_key", "aws_session_token": "aws_session_token"}


class GlueCatalog:
    def __init__(self, settings: CatalogSettings) -> None:
        self.name = settings.name
        self._options = dict(settings.options)
        self._client: Any = None

    def _glue(self) -> Any:
        if self._client is None:
            try:
                import boto3
            except ImportError:
                raise CatalogError(f"catalog '{self.name}' is a glue catalog and needs boto3",
                                   hint="pip install 'compactor[catalogs]'") from None
            session = boto3.session.Session(profile_name=self._options.get("profile"))
            kwargs = {arg: self._options[k] for k, arg in CLIENT_KEYS.items() if self._options.get(k)}
            self._client = session.client("glue", **kwargs)
        return self._client

    def _call(self, what: str, fn: Any, **kwargs: Any) -> Any:
        if self._options.get("catalog_id"):
            kwargs["CatalogId"] = self._options["catalog_id"]
        try:
            return fn(**kwargs)
        except Exception as e:  # noqa: BLE001 - botocore's errors: one clear line, never a traceback
            first = str(e).splitlines()[0] if str(e) else type(e).__name__
            raise CatalogError(f"catalog '{self.name}' (glue): {what}: {first}") from None

    def list_tables(self, namespace: str) -> list[CatalogTable]:
        glue = self._glue()
        out: list[CatalogTable] = []
        token: str | None = None
        while True:
            page = self._call(f"cannot list the tables of database '{namespace}'", glue.get_tables,
                              DatabaseName=namespace, **({"NextToken": token} if token else {}))
            out += [self._table(namespace, t) for t in page.get("TableList", ())]
            token = page.get("NextToken")
            if not token:
                return out

    def get_table(self, namespace: str, name: str) -> CatalogTable:
        glue = self._glue()
        found = self._call(f"cannot read table '{namespace}.{name}'", glue.get_table, DatabaseName=namespace, Name=name)
        return self._table(namespace, found["Table"])

    def _table(self, namespace: str, t: Mapping[str, Any]) -> CatalogTable:
        params = {str(k).lower(): str(v) for k, v in (t.get("Parameters") or {}).items()}
        sd = t.get("StorageDescriptor") or {}
        serde = {str(k).lower(): str(v) for k, v in ((sd.get("SerdeInfo") or {}).get("Parameters") or {}).items()}
        name = str(t["Name"])
        if params.get("table_type", "").upper() == ICEBERG.upper():
            location = sd.get("Location") or params.get("metadata_location", "").rpartition("/metadata/")[0]
            return by_provider(self.name, namespace, name, ICEBERG, local_path(location) if location else None,
                               kind="an Iceberg table")
        provider = params.get("spark.sql.sources.provider", "")
        kind = f"a {provider} table" if provider else f"a {t.get('TableType') or 'Hive'} table without a Spark provider"
        return by_provider(self.name, namespace, name, provider, serde.get("path") or sd.get("Location") or None,
                           kind=kind)
