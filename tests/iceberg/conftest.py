"""The Iceberg tests' REST catalog: one server per test module that asks for it (tests/iceberg/rest_server.py),
skipped saying why when it cannot run here."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from tests.iceberg.rest_server import RestServer, RestServerUnavailable, start_rest_server


@pytest.fixture(scope="module")
def rest_catalog(tmp_path_factory: pytest.TempPathFactory) -> Iterator[RestServer]:
    """A REST catalog on loopback, with its own sqlite database and warehouse, for the whole module."""
    pytest.importorskip("pyiceberg", reason="pyiceberg is not installed (pip install 'compactor[iceberg]')")
    try:
        server = start_rest_server(tmp_path_factory.mktemp("rest-catalog"))
    except RestServerUnavailable as e:
        pytest.skip(f"no Iceberg REST catalog: {e}")
    yield server
    server.stop()
