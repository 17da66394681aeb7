"""Where a file-sink output lives, and how manifest entries map onto it.

Spark's manifest names each data file by an absolute location: a plain path or a ``file:`` URI on local
disk, an ``s3a://``/``s3://``/``abfss://``... URI on object stores (URL-encoded since Spark 3.5).
``SinkRoot`` turns such an entry into a path relative to the sink's root (``None`` when the file lies
elsewhere: a copied sink whose log still names the original location), and a relative path back into
the location compactor hands to engines and records in its ledger: the absolute local path, or
``<root URI>/<relative path>`` on object stores. Every read, write and delete goes through the root's
``runtime.storage.Storage``.
"""

from __future__ import annotations

import posixpath
from collections.abc import Mapping
from pathlib import Path
from urllib.parse import unquote, urlsplit

from compactor.errors import TableReadError
from compactor.runtime.paths import is_remote, local_path
from compactor.runtime.storage import SCHEMES, Storage, storage_for


def _store_key(uri: str) -> tuple[str, str, str, str]:
    """(backend, bucket or container, account or "", path without slashes) of an object-store URI."""
    parts = urlsplit(uri)
    backend = SCHEMES.get(parts.scheme.lower(), parts.scheme.lower())
    bucket, _, account_host = parts.netloc.partition("@")
    return backend, bucket, account_host.split(".")[0], unquote(parts.path).strip("/")


class SinkRoot:
    """The root folder of one file-sink output (local path or object-store URI)."""

    def __init__(self, uri: str, storage_options: Mapping[str, str] | None = None) -> None:
        self.uri = uri.rstrip("/") if is_remote(uri) else str(Path(local_path(uri)))
        self.remote = is_remote(uri)
        self.storage_options = dict(storage_options or {})
        self.storage: Storage = storage_for(self.uri, self.storage_options)
        self.path = None if self.remote else Path(self.uri)
        if self.remote:
            self._key = _store_key(self.uri)

    def __str__(self) -> str:
        return self.uri

    # ---------------------------------------------------------------- entries <-> relative paths

    def rel(self, raw: str) -> str | None:
        """The path of a manifest entry relative to the root; None when it lies outside the root."""
        if not self.remote:
            from compactor.formats.file_sink.log import entry_local_path

            assert self.path is not None
            try:
                p = entry_local_path(raw, self.path)
            except TableReadError:
                return None
            for a, b in ((p, self.path), (p.resolve(), self.path.resolve())):
                try:
                    return a.relative_to(b).as_posix()
                except ValueError:
                    continue
            return None
        if not is_remote(raw):
            return None
        backend, bucket, account, path = _store_key(raw)
        mb, mbucket, maccount, mpath = self._key
        if (backend, bucket) != (mb, mbucket) or (account and maccount and account != maccount):
            return None
        if mpath and not path.startswith(mpath + "/"):
            return None
        rel = path[len(mpath) + 1:] if mpath else path
        return rel if rel and ".." not in rel.split("/") else None

    def location(self, rel: str) -> str:
        """The absolute location of a relative path (what engines read and the ledger records)."""
        if self.remote:
            return f"{self.uri}/{rel}"
        assert self.path is not None
        return str(self.path / rel)

    def rel_of_location(self, location: str) -> str | None:
        """The inverse of ``location`` (journal and ledger entries); None outside the root."""
        if self.remote:
            prefix = self.uri + "/"
            return location[len(prefix):] if location.startswith(prefix) else self.rel(location)
        return self.rel(location)

    @staticmethod
    def sibling_entry(example: str, name: str) -> str:
        """A manifest entry for file ``name`` in the same folder as the entry ``example``, written the
        way the writer wrote ``example`` (same scheme and encoding)."""
        return f"{example.rsplit('/', 1)[0]}/{name}"

    @staticmethod
    def folder(rel: str) -> str:
        return posixpath.dirname(rel)
