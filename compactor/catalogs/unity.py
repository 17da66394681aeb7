"""Unity Catalog through its REST API: the tables of a schema as locations and formats, no JVM.

The open-source server and Databricks workspaces serve the same API under ``{host}/api/2.1/unity-catalog``.
Followed: the OpenAPI spec ``api/all.yaml`` of github.com/unitycatalog/unitycatalog (commit c9ed6b1, 2026-08;
servers: ``http://localhost:8080/api/2.1/unity-catalog``), its paths

- ``GET /tables`` (listTables: ``catalog_name``, ``schema_name`` required; ``max_results``, at most 50;
  ``page_token``) answering a ``ListTablesResponse``: ``tables`` and ``next_page_token``, absent on the
  last page;
- ``GET /tables/{full_name}`` (getTable: ``catalog.schema.table``; ``read_streaming_table_as_managed`` and
  ``read_materialized_view_as_managed`` default to true, sent as false so that those tables show their
  own type) answering a ``TableInfo``;

and its schemas ``TableInfo`` (``name``, ``table_type``, ``data_source_format``, ``storage_location``),
``TableType`` (MANAGED, EXTERNAL, STREAMING_TABLE, MATERIALIZED_VIEW, METRIC_VIEW, VIEW) and
``DataSourceFormat`` (DELTA, CSV, JSON, AVRO, PARQUET, ORC, TEXT; Databricks' API lists more, ICEBERG among
them). Errors come back as JSON ``{"error_code": ..., "message": ...}`` (the server's GlobalExceptionHandler;
Databricks documents the same shape). Tested against the open-source server, not a Databricks workspace.

A MANAGED or EXTERNAL Delta table is planned at its ``storage_location`` (provider ``delta``, as Glue and
Hive tables are); views, pipeline-maintained tables and other formats are reported with why not. A
namespace is ``<uc catalog>.<schema>``, or ``<schema>`` when the profile entry sets ``catalog``. The
``token`` option is sent as a bearer token and never appears in a message; redirects are not followed, so
it never reaches another host.

The standard library's urllib is the client: the official ``unitycatalog-client`` package is generated
for asyncio (aiohttp, pydantic) and brings those dependencies for two GET requests.
"""

from __future__ import annotations

import http.client
import json
import urllib.error
import urllib.parse
import urllib.request
from collections.abc import Mapping
from typing import Any

from compactor import __version__
from compactor.catalogs.base import by_provider, local_path
from compactor.errors import CatalogError
from compactor.models.catalog import CatalogSettings, CatalogTable

API = "/api/2.1/unity-catalog"
#: listTables' max_results: the spec's maximum
PAGE_SIZE = 50
TIMEOUT_S = 30.0
#: table types whose storage is not a table compactor may rewrite
NOT_PLANNED_TYPES = {
    "VIEW": "a view: it stores no data",
    "METRIC_VIEW": "a metric view: it stores no data",
    "MATERIALIZED_VIEW": "a materialized view: its pipeline maintains its storage",
    "STREAMING_TABLE": "a streaming table: its pipeline maintains its storage",
}


class _NoRedirect(urllib.request.HTTPRedirectHandler):
    """A redirect is an error (the request carries the token; a redirect could send it to another host)."""

    def redirect_request(self, req: Any, fp: Any, code: int, msg: str, headers: Any, newurl: str) -> None:
        return None


def _one_line(text: str, limit: int = 300) -> str:
    line = " ".join(text.split())
    return line if len(line) <= limit else line[: limit - 3] + "..."


def _base_url(catalog: str, host: str) -> str:
    """``host`` without a trailing slash or API prefix; a CatalogError unless it is an http(s) URL."""
    hint = "host: http://localhost:8080 or https://<workspace host>: the URL that serves /api/2.1/unity-catalog"
    if not host:
        raise CatalogError(f"catalog '{catalog}' (unity): no host", hint=hint)
    try:
        parts = urllib.parse.urlsplit(host)
        parts.port  # noqa: B018 - raises ValueError on a port that is not a number
    except ValueError as e:
        raise CatalogError(f"catalog '{catalog}' (unity): host is not a URL: {e}", hint=hint) from None
    if parts.scheme not in ("http", "https") or not parts.hostname:
        shown = f"'{host}'" if not (parts.username or parts.password) else "(a URL with credentials)"
        raise CatalogError(f"catalog '{catalog}' (unity): host {shown} is not an http:// or https:// URL",
                           hint=hint)
    if parts.username or parts.password or parts.query or parts.fragment:
        raise CatalogError(f"catalog '{catalog}' (unity): host must be a plain http(s)://host[:port] URL, without "
                           "credentials, query or fragment", hint="credentials go in the token option")
    path = parts.path.rstrip("/")
    if path.endswith(API):
        path = path[: -len(API)]
    return urllib.parse.urlunsplit((parts.scheme, parts.netloc, path, "", ""))


def _server_message(e: urllib.error.HTTPError) -> tuple[str, str | None]:
    """``HTTP <code> <error_code>: <message>`` from UC's JSON error, else the body's first words; and a hint
    when the answer does not look like Unity Catalog's."""
    try:
        body = e.read(65536).decode("utf-8", errors="replace")
    except Exception:  # noqa: BLE001 - the status line is enough
        body = ""
    detail, hint = "", None
    try:
        doc = json.loads(body)
    except ValueError:
        doc = None
    if isinstance(doc, dict):
        message = doc.get("message") or doc.get("detail") or doc.get("error") or ""
        code = doc.get("error_code") or ""
        detail = ": ".join(str(x) for x in (code, message) if x)
        if not code and e.code == 404:
            hint = "is host the URL that serves /api/2.1/unity-catalog?"
    else:
        detail = body if body.strip() and not body.lstrip().startswith("<") else ""
        if e.code == 404:
            hint = "is host the URL that serves /api/2.1/unity-catalog?"
    if e.code in (301, 302, 303, 307, 308):
        where = e.headers.get("Location", "") if e.headers else ""
        detail = f"redirected to {where or 'another URL'}, not followed"
        hint = "host should be the URL that serves /api/2.1/unity-catalog itself"
    return _one_line(f"HTTP {e.code} {detail or e.reason}"), hint


class UnityCatalog:
    def __init__(self, settings: CatalogSettings) -> None:
        self.name = settings.name
        options = settings.options
        self._base = _base_url(self.name, str(options.get("host") or "").strip())
        self._token = str(options.get("token") or "")
        self._default = str(options.get("catalog") or "")
        self._opener = urllib.request.build_opener(_NoRedirect())

    def _get(self, what: str, path: str, query: Mapping[str, Any]) -> dict[str, Any]:
        url = f"{self._base}{API}{path}?{urllib.parse.urlencode(query)}"
        request = urllib.request.Request(url, headers={"Accept": "application/json",
                                                       "User-Agent": f"compactor/{__version__}"})
        if self._token:
            request.add_header("Authorization", f"Bearer {self._token}")
        prefix = f"catalog '{self.name}' (unity): {what}"
        try:
            with self._opener.open(request, timeout=TIMEOUT_S) as response:
                body = response.read()
        except urllib.error.HTTPError as e:
            message, hint = _server_message(e)
            raise CatalogError(f"{prefix}: {message}", hint=hint) from None
        except urllib.error.URLError as e:
            r = e.reason
            if isinstance(r, TimeoutError):
                raise CatalogError(f"{prefix}: no answer from {self._base} within {TIMEOUT_S:g} s") from None
            reason = (getattr(r, "strerror", None) or str(r)) if isinstance(r, OSError) else str(r)
            raise CatalogError(f"{prefix}: cannot connect to {self._base}: {_one_line(reason)}") from None
        except TimeoutError:
            raise CatalogError(f"{prefix}: no answer from {self._base} within {TIMEOUT_S:g} s") from None
        except (OSError, http.client.HTTPException) as e:
            raise CatalogError(f"{prefix}: the connection to {self._base} failed: "
                               f"{_one_line(str(e) or type(e).__name__)}") from None
        try:
            doc = json.loads(body)
        except ValueError:
            doc = None
        if not isinstance(doc, dict):
            raise CatalogError(f"{prefix}: {self._base} answered with something other than a JSON object",
                               hint=f"host should be the URL that serves {API}/")
        return doc

    def _schema(self, namespace: str) -> tuple[str, str]:
        parts = namespace.split(".")
        if len(parts) == 2 and all(parts):
            return parts[0], parts[1]
        if len(parts) == 1 and parts[0] and self._default:
            return self._default, parts[0]
        need = "<catalog>.<schema>" if not self._default else f"<schema> (in '{self._default}') or <catalog>.<schema>"
        raise CatalogError(f"catalog '{self.name}' (unity): namespace '{namespace}' is not {need}",
                           hint="Unity Catalog names are three-level: set the catalog option for a default "
                                "UC catalog, or write namespace: <catalog>.<schema>")

    def list_tables(self, namespace: str) -> list[CatalogTable]:
        uc_catalog, schema = self._schema(namespace)
        what = f"cannot list the tables of schema '{uc_catalog}.{schema}'"
        out: list[CatalogTable] = []
        token = ""
        seen: set[str] = set()
        while True:
            query = {"catalog_name": uc_catalog, "schema_name": schema, "max_results": PAGE_SIZE}
            page = self._get(what, "/tables", {**query, **({"page_token": token} if token else {})})
            tables = page.get("tables") or []
            if not isinstance(tables, list):
                raise CatalogError(f"catalog '{self.name}' (unity): {what}: 'tables' is not a list")
            out += [self._table(namespace, t, "") for t in tables if isinstance(t, dict)]
            token = str(page.get("next_page_token") or "")
            if not token:
                return sorted(out, key=lambda t: t.name)
            if token in seen:
                raise CatalogError(f"catalog '{self.name}' (unity): {what}: the server repeated a page token")
            seen.add(token)

    def get_table(self, namespace: str, name: str) -> CatalogTable:
        uc_catalog, schema = self._schema(namespace)
        full = f"{uc_catalog}.{schema}.{name}"
        info = self._get(f"cannot read table '{full}'", "/tables/" + urllib.parse.quote(full, safe=""),
                         {"read_streaming_table_as_managed": "false", "read_materialized_view_as_managed": "false"})
        return self._table(namespace, info, name)

    def _table(self, namespace: str, info: Mapping[str, Any], name: str) -> CatalogTable:
        name = str(info.get("name") or name)
        table_type = str(info.get("table_type") or "").upper()
        fmt = str(info.get("data_source_format") or "").upper()
        location = local_path(str(info["storage_location"])) if info.get("storage_location") else None
        if table_type in NOT_PLANNED_TYPES:
            return CatalogTable(self.name, namespace, name, location, None,
                                f"{NOT_PLANNED_TYPES[table_type]}: compactor plans MANAGED and EXTERNAL Delta tables")
        if fmt == "ICEBERG":
            return CatalogTable(self.name, namespace, name, location, None,
                                "an Iceberg table: compactor does not plan Iceberg tables yet")
        kind = f"a {fmt} table" if fmt else f"a {table_type or 'Unity Catalog'} table without a data_source_format"
        return by_provider(self.name, namespace, name, fmt.lower(), location, kind=kind)
