"""Shared ``Storage`` instances: one per (root URI, storage options) per process."""

from __future__ import annotations

import threading
from collections.abc import Mapping
from pathlib import Path
from typing import Any
from urllib.parse import unquote, urlsplit

from compactor.runtime.storage.base import SCHEMES, Storage

_CACHE: dict[tuple[str, tuple[tuple[str, str], ...]], Storage] = {}
_CACHE_LOCK = threading.Lock()
_CACHE_MAX = 256


def storage_for(uri: str, storage_options: Mapping[str, Any] | None = None) -> Storage:
    """One shared ``Storage`` per (root URI, storage options): an object store's HTTP client, its
    connection pool and its pyarrow filesystem are built once per process, not per call."""
    key = (uri.rstrip("/") or uri, tuple(sorted((str(k), str(v)) for k, v in (storage_options or {}).items())))
    with _CACHE_LOCK:
        st = _CACHE.get(key)
    if st is not None:
        return st
    st = Storage.for_uri(uri, storage_options)
    with _CACHE_LOCK:
        if len(_CACHE) >= _CACHE_MAX:
            _CACHE.pop(next(iter(_CACHE)))
        return _CACHE.setdefault(key, st)


def locate(location: str, storage_options: Mapping[str, Any] | None = None) -> tuple[Storage, str]:
    """The shared Storage of the bucket/container (object stores) or of ``/`` (local disk) that holds
    ``location``, and the path of ``location`` relative to it. Object-store paths are taken literally
    (a table's paths are logical: a ``%`` in them is a ``%`` in the key); ``file://`` URIs are decoded."""
    parts = urlsplit(location)
    scheme = parts.scheme.lower()
    if scheme in SCHEMES:
        path = location.split("?", 1)[0][len(scheme) + 3 + len(parts.netloc):]
        return storage_for(f"{scheme}://{parts.netloc}", storage_options), path.strip("/")
    path = unquote(parts.path) if scheme == "file" else location
    p = Path(path).expanduser().absolute()
    return storage_for(p.anchor or "/"), p.as_posix()[len(p.anchor or "/"):]
