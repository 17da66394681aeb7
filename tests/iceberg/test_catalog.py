"""Iceberg catalogs opened from typed settings (runtime/iceberg_catalog.py, formats/iceberg/catalog.py): a table loads by identifier; every
failure is one CompactorError line naming the catalog, the table and the cause, with no secret in it."""

from __future__ import annotations

import socket
from pathlib import Path

import pytest

pytest.importorskip("pyiceberg", reason="pyiceberg is not installed (pip install 'compactor[iceberg]')")

from compactor.errors import CatalogError  # noqa: E402
from compactor.formats.iceberg.catalog import open_table  # noqa: E402
from compactor.runtime.iceberg_catalog import (  # noqa: E402
    IcebergCatalogError,
    IcebergTableNotFound,
    RestCatalogSettings,
    SqlCatalogSettings,
    open_catalog,
)
from tests.iceberg.tables import make_table, settings  # noqa: E402


def test_a_table_loads_by_identifier(tmp_path: Path) -> None:
    make_table(tmp_path, "unpartitioned")
    s = settings(tmp_path)
    t = open_table(s, "db.unpartitioned")
    assert t.name() == ("cat", "db", "unpartitioned") or t.name()[-2:] == ("db", "unpartitioned")
    assert open_table(s, ("db", "unpartitioned")).metadata.table_uuid == t.metadata.table_uuid


@pytest.mark.parametrize(("identifier", "said"), [
    ("db.nope", "has no table db.nope: NoSuchTableError"),
    ("nodb.t", "has no table nodb.t"),
    ("justaname", "needs a namespace and a table name"),
])
def test_missing_tables_name_catalog_table_and_cause(tmp_path: Path, identifier: str, said: str) -> None:
    make_table(tmp_path, "unpartitioned")
    with pytest.raises(IcebergTableNotFound) as e:
        open_table(settings(tmp_path), identifier)
    assert said in str(e.value)
    if "." in identifier:
        assert str(e.value).startswith("Iceberg catalog 'cat' (sql at sqlite:///")
    assert isinstance(e.value, CatalogError) and "Traceback" not in str(e.value) and "\n" not in str(e.value)


def test_an_unreachable_sql_catalog_is_one_clear_error(tmp_path: Path) -> None:
    s = SqlCatalogSettings("c", f"sqlite:///{tmp_path}/no/such/dir/catalog.db")
    with pytest.raises(IcebergCatalogError, match=r"Iceberg catalog 'c' \(sql at sqlite:///.*\): cannot open it: "):
        open_table(s, "db.t")


def test_a_rest_catalog_that_does_not_answer_is_one_clear_error_without_its_secrets() -> None:
    with socket.socket() as sock:  # a loopback port nothing listens on
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    s = RestCatalogSettings("r", f"http://127.0.0.1:{port}", credential="client:very-secret-value")
    with pytest.raises(IcebergCatalogError) as e:
        open_catalog(s)
    text = str(e.value)
    assert text.startswith(f"Iceberg catalog 'r' (rest at http://127.0.0.1:{port}): cannot open it: ")
    assert "very-secret-value" not in text and "\n" not in text


def test_a_uri_password_is_not_shown(tmp_path: Path) -> None:
    s = SqlCatalogSettings("p", "postgresql+psycopg2://user:hunter2-password@127.0.0.1:1/db")
    with pytest.raises(IcebergCatalogError) as e:
        open_table(s, "db.t")
    assert "hunter2-password" not in str(e.value) and "user:***@127.0.0.1:1" in str(e.value)
