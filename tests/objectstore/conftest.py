"""Session-scoped object-store emulators (moto S3 and Azurite) on loopback, and a ``store_root`` fixture
parametrized over local disk, S3 and Azure that gives every test its own empty root URI."""

from __future__ import annotations

import os
import uuid
from dataclasses import dataclass

import pytest

from tests.objectstore.servers import STARTERS, EmulatorUnavailable, ObjectStoreServer

BACKENDS = ["local", "s3", "azure"]


def _start(kind: str) -> ObjectStoreServer:
    try:
        return STARTERS[kind]()
    except EmulatorUnavailable as e:
        pytest.skip(f"{kind} emulator unavailable: {e}")


@pytest.fixture(scope="session")
def s3_server():
    server = _start("s3")
    saved = {k: os.environ.get(k) for k in server.env}
    os.environ.update(server.env)
    yield server
    server.stop()
    _restore(saved)


@pytest.fixture(scope="session")
def azure_server():
    server = _start("azure")
    saved = {k: os.environ.get(k) for k in server.env}
    # delta-rs and obstore read AZURITE_BLOB_STORAGE_URL when AZURE_STORAGE_USE_EMULATOR is set
    os.environ.update(server.env)
    yield server
    server.stop()
    _restore(saved)


def _restore(saved: dict[str, str | None]) -> None:
    for k, v in saved.items():
        if v is None:
            os.environ.pop(k, None)
        else:
            os.environ[k] = v


@dataclass(frozen=True)
class StoreRoot:
    """One test's own empty root: ``uri`` (a local path or ``s3://``/``az://`` URI) and its options."""

    backend: str
    uri: str
    storage_options: dict[str, str]
    server: ObjectStoreServer | None = None

    def child(self, name: str) -> str:
        return f"{self.uri.rstrip('/')}/{name}"


@pytest.fixture(params=BACKENDS)
def store_root(request, tmp_path) -> StoreRoot:
    kind = request.param
    if kind == "local":
        return StoreRoot("local", str(tmp_path / "root"), {})
    server = request.getfixturevalue("s3_server" if kind == "s3" else "azure_server")
    return StoreRoot(kind, server.uri(f"t-{uuid.uuid4().hex[:12]}"), dict(server.storage_options), server)
