"""An Iceberg catalog of the target opened through pyiceberg (no JVM), from a profile's ``catalogs:`` entry
(models/catalog.py), and a table loaded from it by identifier. The one place that opens one: the catalogs
layer lists a namespace through it (catalogs/iceberg_catalogs.py), the Iceberg format reads and commits a
table through it (formats/iceberg/catalog.py). SQL (sqlite, PostgreSQL, ... through SQLAlchemy), REST, AWS
Glue and Hive metastore (thrift) catalogs. The tables' files are read and written through pyiceberg's FileIO,
with the target's ``storage_options`` (object_store's keys) as its S3 properties.

Every failure is a CatalogError naming the catalog, the table and the cause in one line (never a
traceback): ``IcebergCatalogError`` when the catalog cannot be opened or answered, ``IcebergTableNotFound``
when it holds no such table (or namespace). Property values that may be secrets (credentials, tokens,
passwords, keys, and the password of a URI) are registered with runtime/secrets, so no message or log line
shows them."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Literal
from urllib.parse import urlsplit, urlunsplit

from compactor.errors import CatalogError
from compactor.models.catalog import CatalogSettings
from compactor.runtime.secrets import redact, register_secrets

if TYPE_CHECKING:
    from pyiceberg.catalog import Catalog
    from pyiceberg.table import Table

#: property names whose values are secrets (matched as substrings of the lower-cased name)
_SECRET_WORDS = ("credential", "token", "password", "secret", "access-key", "session-key", "private-key", "sas")


class IcebergCatalogError(CatalogError):
    """An Iceberg catalog could not be opened or did not answer."""

    code = "iceberg_catalog"


class IcebergTableNotFound(CatalogError):
    """The catalog holds no table (or no namespace) by that identifier."""

    code = "iceberg_table_not_found"


@dataclass(frozen=True)
class SqlCatalogSettings:
    """pyiceberg's SqlCatalog: the catalog's tables in a SQL database (``uri``: a SQLAlchemy URL such as
    ``sqlite:////abs/catalog.db``). ``name`` is stored in every row of ``iceberg_tables``: it must be the
    name the table's other writers (Spark's JDBC catalog) use."""

    name: str
    uri: str
    #: where new tables go (``file:///abs/warehouse``, ``s3://bucket/wh``); None: the catalog's default
    warehouse: str | None = None
    #: further pyiceberg catalog properties (FileIO settings such as ``s3.region``, ...)
    properties: Mapping[str, str] = field(default_factory=dict)
    kind: Literal["sql"] = "sql"

    @property
    def where(self) -> str:
        return shown_uri(self.uri)


@dataclass(frozen=True)
class RestCatalogSettings:
    """An Iceberg REST catalog (``uri``: ``http://host:port``, the server's base URL)."""

    name: str
    uri: str
    warehouse: str | None = None
    #: OAuth2 client credential ``id:secret``, or a bearer token (secrets: never shown)
    credential: str | None = None
    token: str | None = None
    properties: Mapping[str, str] = field(default_factory=dict)
    kind: Literal["rest"] = "rest"

    @property
    def where(self) -> str:
        return shown_uri(self.uri)


@dataclass(frozen=True)
class GlueCatalogSettings:
    """AWS Glue (pyiceberg's GlueCatalog, through boto3): the Iceberg tables of a Glue database. The AWS
    credentials and region are pyiceberg's ``client.*`` properties, which its S3 FileIO also takes unless the
    target's storage options name S3's own; ``endpoint_url`` reaches Glue only."""

    name: str
    region: str | None = None
    endpoint_url: str | None = None
    catalog_id: str | None = None
    profile: str | None = None
    aws_access_key_id: str | None = field(default=None, repr=False)
    aws_secret_access_key: str | None = field(default=None, repr=False)
    aws_session_token: str | None = field(default=None, repr=False)
    properties: Mapping[str, str] = field(default_factory=dict)
    kind: Literal["glue"] = "glue"

    @property
    def where(self) -> str:
        return self.endpoint_url or f"AWS Glue in {self.region or 'the default region'}"


@dataclass(frozen=True)
class HiveCatalogSettings:
    """A Hive metastore served over thrift (pyiceberg's HiveCatalog; ``uri``: ``thrift://host:9083``, several
    comma-separated): the Iceberg tables of a Hive database."""

    name: str
    uri: str
    warehouse: str | None = None
    properties: Mapping[str, str] = field(default_factory=dict)
    kind: Literal["hive"] = "hive"

    @property
    def where(self) -> str:
        return shown_uri(self.uri)


IcebergCatalogSettings = SqlCatalogSettings | RestCatalogSettings | GlueCatalogSettings | HiveCatalogSettings

#: the catalog types (profiles.yml ``catalogs: {NAME: {type: ...}}``) pyiceberg opens
ICEBERG_CATALOG_TYPES = ("sql", "rest", "glue", "hive")

#: GlueCatalogSettings' fields -> pyiceberg's properties
_GLUE_PROPERTIES = {"region": "client.region", "endpoint_url": "glue.endpoint", "catalog_id": "glue.id",
                    "profile": "client.profile-name", "aws_access_key_id": "client.access-key-id",
                    "aws_secret_access_key": "client.secret-access-key", "aws_session_token": "client.session-token"}

#: object_store's S3 keys (the target's storage_options, lower-cased, without their ``aws_`` prefix) ->
#: pyiceberg's S3 FileIO properties
_S3_PROPERTIES = {"endpoint": "s3.endpoint", "endpoint_url": "s3.endpoint", "access_key_id": "s3.access-key-id",
                  "secret_access_key": "s3.secret-access-key", "session_token": "s3.session-token",
                  "token": "s3.session-token", "region": "s3.region", "default_region": "s3.region"}


def fileio_properties(storage_options: Mapping[str, str]) -> dict[str, str]:
    """The S3 FileIO properties of pyiceberg that the target's ``storage_options`` name (its endpoint,
    credentials and region: ``AWS_ENDPOINT_URL``, ``aws_access_key_id``, ...); other keys are not pyiceberg's."""
    out: dict[str, str] = {}
    for key, value in storage_options.items():
        k = key.lower()
        prop = _S3_PROPERTIES.get(k.removeprefix("aws_")) if k.startswith("aws_") else None
        if prop is not None:
            out[prop] = str(value)
    return out


def _props(settings: IcebergCatalogSettings) -> dict[str, str]:
    """The pyiceberg properties of ``settings``."""
    props = {str(k): str(v) for k, v in settings.properties.items()}
    if isinstance(settings, GlueCatalogSettings):
        for name, prop in _GLUE_PROPERTIES.items():
            value = getattr(settings, name)
            if value:
                props[prop] = str(value)
        return props
    props["uri"] = settings.uri
    if settings.warehouse is not None:
        props["warehouse"] = settings.warehouse
    if isinstance(settings, RestCatalogSettings):
        if settings.credential is not None:
            props["credential"] = settings.credential
        if settings.token is not None:
            props["token"] = settings.token
    return props


def register_property_secrets(props: Mapping[str, str]) -> None:
    """Register the values of ``props`` (catalog properties, pyiceberg's or Iceberg Java's) that may be secrets."""
    secrets = {k: v for k, v in props.items() if any(w in k.lower() for w in _SECRET_WORDS)}
    password = urlsplit(props.get("uri", "")).password
    if password:
        secrets["uri.password"] = password
    register_secrets(secrets)


def shown_uri(uri: str) -> str:
    """``uri`` as messages show it: without a password."""
    parts = urlsplit(uri)
    if not parts.password:
        return uri
    host = parts.hostname or ""
    netloc = f"{parts.username}:***@{host}" + (f":{parts.port}" if parts.port else "")
    return urlunsplit((parts.scheme, netloc, parts.path, parts.query, parts.fragment))


def cause(e: BaseException) -> str:
    """One line naming an exception: its type and the first line of its message, secrets redacted."""
    text = str(e).strip().splitlines()
    first = text[0] if text else ""
    name = type(e).__name__
    return redact(f"{name}: {first}" if first else name)


def describe(settings: IcebergCatalogSettings) -> str:
    """How messages name a catalog: ``Iceberg catalog 'c' (sql at sqlite:///...)``."""
    return f"Iceberg catalog '{settings.name}' ({settings.kind} at {settings.where})"


def open_catalog(settings: IcebergCatalogSettings) -> Catalog:
    """The pyiceberg catalog ``settings`` describe. Raises IcebergCatalogError when pyiceberg is missing or
    the catalog cannot be opened (a SQL database it cannot reach, a REST server that does not answer; Glue
    and a Hive metastore are first asked when a table is loaded)."""
    props = _props(settings)
    register_property_secrets(props)
    try:
        if isinstance(settings, SqlCatalogSettings):
            from pyiceberg.catalog.sql import SqlCatalog

            return SqlCatalog(settings.name, **props)
        if isinstance(settings, GlueCatalogSettings):
            from pyiceberg.catalog.glue import GlueCatalog

            return GlueCatalog(settings.name, **props)
        if isinstance(settings, HiveCatalogSettings):
            from pyiceberg.catalog.hive import HiveCatalog

            return HiveCatalog(settings.name, **props)
        from pyiceberg.catalog.rest import RestCatalog

        return RestCatalog(settings.name, **props)
    except ImportError as e:
        raise IcebergCatalogError(f"{describe(settings)}: cannot open it: {cause(e)}",
                                  hint="install compactor's Iceberg support: pip install 'compactor[iceberg]'") from None
    except Exception as e:  # pyiceberg and its drivers raise many kinds (SQLAlchemy, requests, pydantic)
        raise IcebergCatalogError(f"{describe(settings)}: cannot open it: {cause(e)}") from None


def parse_identifier(identifier: str | tuple[str, ...]) -> tuple[str, ...]:
    """``db.table`` (or ``("db", "table")``) as a tuple of at least two names."""
    parts = tuple(identifier.split(".")) if isinstance(identifier, str) else tuple(identifier)
    if len(parts) < 2 or any(not p for p in parts):
        raise IcebergTableNotFound(f"'{'.'.join(parts)}' is not an Iceberg table identifier: it needs a namespace and "
                                   "a table name (namespace.table)")
    return parts


def load_table(catalog: Catalog, settings: IcebergCatalogSettings, identifier: str | tuple[str, ...]) -> Table:
    """The table ``identifier`` of ``catalog``. Raises IcebergTableNotFound when the catalog holds no such
    table or namespace, IcebergCatalogError when the catalog fails to answer or the table's metadata
    cannot be read."""
    from pyiceberg.exceptions import NoSuchNamespaceError, NoSuchTableError

    parts = parse_identifier(identifier)
    name = ".".join(parts)
    try:
        return catalog.load_table(parts)
    except (NoSuchTableError, NoSuchNamespaceError) as e:
        raise IcebergTableNotFound(f"{describe(settings)} has no table {name}: {cause(e)}") from None
    except Exception as e:
        raise IcebergCatalogError(f"{describe(settings)}: cannot load table {name}: {cause(e)}") from None


def settings_from(profile: CatalogSettings, storage_options: Mapping[str, str] | None = None) -> IcebergCatalogSettings:
    """The typed settings of a target's ``catalogs:`` entry of type ``sql``, ``rest`` (its options are
    pyiceberg's catalog properties), ``glue`` or ``hive`` (a metastore served over thrift: ``metastore_uris``),
    with the S3 FileIO properties of the target's ``storage_options``. Raises IcebergCatalogError for a
    catalog pyiceberg cannot open."""
    options = dict(profile.options)
    io = fileio_properties(storage_options or {})
    if profile.type == "glue":
        return GlueCatalogSettings(profile.name, options.get("region"), options.get("endpoint_url"),
                                   options.get("catalog_id"), options.get("profile"), options.get("aws_access_key_id"),
                                   options.get("aws_secret_access_key"), options.get("aws_session_token"), io)
    if profile.type == "hive":
        if not options.get("metastore_uris"):
            raise IcebergCatalogError(
                f"catalog '{profile.name}' is a hive catalog without a metastore server: compactor reads Iceberg "
                "tables of a Hive metastore through its thrift API (pyiceberg, no JVM), and an embedded Derby "
                "metastore (metastore_db) has none",
                hint="serve the metastore (hive --service metastore) and give its `metastore_uris: thrift://host:9083`")
        if options.get("hive2_compatible", "").strip().lower() in ("true", "1", "yes"):
            io["hive.hive2-compatible"] = "true"  # Hive 2 knows no 'timestamp with local time zone' column
        return HiveCatalogSettings(profile.name, options["metastore_uris"], options.get("warehouse"), io)
    uri = options.pop("uri", "")
    warehouse = options.pop("warehouse", None)
    if profile.type == "sql":
        return SqlCatalogSettings(profile.name, uri, warehouse, {**io, **options})
    if profile.type == "rest":
        credential, token = options.pop("credential", None), options.pop("token", None)
        return RestCatalogSettings(profile.name, uri, warehouse, credential, token, {**io, **options})
    raise IcebergCatalogError(f"catalog '{profile.name}' is a {profile.type} catalog: compactor reads Iceberg tables "
                              f"through an Iceberg catalog of type {', '.join(ICEBERG_CATALOG_TYPES[:-1])} or "
                              f"{ICEBERG_CATALOG_TYPES[-1]}",
                              hint="declare the table's catalog with one of these types in profiles.yml")
