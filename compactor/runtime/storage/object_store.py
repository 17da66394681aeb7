"""``Storage`` on S3, Azure and GCS through obstore (the Python binding of the Rust ``object_store`` crate
that table libraries build on too), configured from the same ``storage_options`` they take (``options.split_options``).

- ``create_exclusive``: a put with ``If-None-Match: *`` (``mode="create"``); the store refuses the second
  of two racing creators.
- ``put_if_match`` / ``replace_if_match``: a put with ``If-Match: <etag>`` (S3, Azure) or the generation
  (GCS), from the version ``read_versioned`` returned; False when the object changed or is gone.
- ``delete_if_match``: None, object_store offers no conditional delete.
- ``copy`` is server-side; ``copy(overwrite=False)`` on a store without copy-if-absent (S3 without
  ``aws_copy_if_not_exists``) downloads the source and creates the target with If-None-Match.
  ``rename`` is a copy then a delete: a crash in between leaves both.
- ``pyarrow_fs`` builds pyarrow's own S3/Azure/GCS filesystem from the same options.
"""

from __future__ import annotations

import builtins
import logging
import os
import re
from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any
from urllib.parse import urlsplit

from compactor.runtime.storage.base import (
    SCHEMES,
    ObjectInfo,
    ObjectNotFoundError,
    ObjectVersion,
    Storage,
    StorageError,
    register_backend,
)
from compactor.runtime.storage.options import split_options

if TYPE_CHECKING:
    import pyarrow.fs

log = logging.getLogger(__name__)


def _info(m: Mapping[str, Any]) -> ObjectInfo:
    return ObjectInfo(m["path"], m["size"], m["last_modified"].timestamp(), m.get("e_tag"))


class ObjectStoreStorage(Storage):
    """An ``s3://``, ``s3a://``, ``az://``, ``abfs[s]://``, ``adl://`` or ``gs://`` root (see the module docstring)."""

    def __init__(self, uri: str, storage_options: Mapping[str, Any] | None = None) -> None:
        super().__init__(uri, storage_options)
        parts = urlsplit(uri)
        scheme = parts.scheme.lower()
        self.kind = SCHEMES[scheme]
        # s3a is Hadoop's name for the same store; query strings (SAS tokens) are never shown
        self.uri = ("s3" if scheme == "s3a" else scheme) + "://" + parts.netloc + parts.path.rstrip("/")
        self._url = uri.split("?", 1)[0].rstrip("/")
        self._store = self._open_store()

    def _open_store(self) -> Any:
        from obstore.exceptions import UnknownConfigurationKeyError
        from obstore.store import from_url

        config, client, retry = split_options(self.storage_options)
        for _ in range(len(config) + 1):
            with self._errors("open store", ""):
                try:
                    return from_url(self._url, config=config, client_options=client or None,  # type: ignore[call-overload]
                                    retry_config=retry or None)
                except UnknownConfigurationKeyError as e:
                    m = re.search(r"key: '([^']+)'", str(e))
                    if not m or m.group(1) not in config:
                        raise
                    log.debug("storage option %s is not known to the object store; ignored", m.group(1))
                    config.pop(m.group(1))
        raise StorageError(f"{self.uri}: could not configure the object store")

    # ------------------------------------------------------------------ reads

    def read_bytes(self, path: str) -> bytes:
        return self.read_versioned(path)[0]

    def read_versioned(self, path: str) -> tuple[bytes, ObjectVersion]:
        with self._errors("read", path):
            import obstore

            r = obstore.get(self._store, path)
            return bytes(r.bytes()), ObjectVersion(r.meta.get("e_tag"), r.meta.get("version"))

    def head(self, path: str) -> ObjectInfo | None:
        try:
            with self._errors("head", path):
                import obstore

                return _info(obstore.head(self._store, path))
        except ObjectNotFoundError:
            return None

    def list(self, prefix: str = "") -> builtins.list[ObjectInfo]:
        with self._errors("list", prefix):
            import obstore

            out = [_info(m) for batch in obstore.list(self._store, prefix.strip("/") or None) for m in batch]
            return sorted(out, key=lambda o: o.path)

    def list_dir(self, prefix: str = "") -> tuple[builtins.list[ObjectInfo], builtins.list[str]]:
        prefix = prefix.strip("/")
        with self._errors("list", prefix):
            import obstore

            r = obstore.list_with_delimiter(self._store, prefix or None)
            objects = [_info(m) for m in r["objects"]]
            return sorted(objects, key=lambda o: o.path), sorted(d.rstrip("/") for d in r["common_prefixes"])

    def is_dir(self, prefix: str) -> bool:
        objects, dirs = self.list_dir(prefix)
        return bool(objects or dirs)

    # ------------------------------------------------------------------ writes

    def write_bytes(self, path: str, data: bytes) -> None:
        with self._errors("write", path):
            import obstore

            obstore.put(self._store, path, data, mode="overwrite")

    def create_exclusive(self, path: str, data: bytes) -> bool:
        with self._errors("create", path):
            import obstore
            from obstore.exceptions import AlreadyExistsError, PreconditionError

            try:
                obstore.put(self._store, path, data, mode="create")
                return True
            except (AlreadyExistsError, PreconditionError):
                return False

    def replace_if_match(self, path: str, data: bytes, version: ObjectVersion) -> ObjectVersion | None:
        with self._errors("conditional put", path):
            import obstore
            from obstore.exceptions import PreconditionError

            mode: dict[str, str] = {}
            if version.e_tag is not None:
                mode["e_tag"] = version.e_tag
            if version.version is not None:
                mode["version"] = version.version
            if not mode:
                raise StorageError(f"{self.uri}: {path!r} has no version token; conditional put impossible")
            try:
                r = obstore.put(self._store, path, data, mode=mode)  # type: ignore[arg-type]
            except (PreconditionError, FileNotFoundError):  # obstore raises the builtin for a 404
                return None
            return ObjectVersion(r.get("e_tag"), r.get("version"))

    def delete_if_match(self, path: str, version: ObjectVersion) -> bool | None:
        return None

    def delete(self, path: str, *, missing_ok: bool = True) -> None:
        with self._errors("delete", path):
            import obstore

            if not missing_ok and self.head(path) is None:
                raise ObjectNotFoundError(self._redact(f"{self.uri}: delete {path!r}: no such object"))
            try:
                obstore.delete(self._store, path)
            except FileNotFoundError:  # Azure answers 404 for a missing blob; S3 does not tell
                if not missing_ok:
                    raise

    def delete_prefix(self, prefix: str) -> int:
        prefix = self._folder(prefix)
        with self._errors("delete folder", prefix):
            import obstore

            paths = [m["path"] for batch in obstore.list(self._store, prefix) for m in batch]
        self.delete_many(paths)
        return len(paths)

    def delete_many(self, paths: Sequence[str]) -> None:
        """Up to 1,000 paths a request (S3's DeleteObjects; object_store batches each store its own way)."""
        paths = list(paths)
        with self._errors("delete", f"{len(paths)} objects"):
            import obstore

            for i in range(0, len(paths), 1000):
                try:
                    obstore.delete(self._store, paths[i:i + 1000])
                except FileNotFoundError:  # Azure: one was deleted concurrently
                    for q in paths[i:i + 1000]:
                        self.delete(q)

    def copy(self, src: str, dst: str, *, overwrite: bool = True) -> bool:
        with self._errors("copy", f"{src} -> {dst}"):
            import obstore
            from obstore.exceptions import AlreadyExistsError, NotSupportedError, PreconditionError

            if overwrite:
                obstore.copy(self._store, src, dst, overwrite=True)
                return True
            try:
                obstore.copy(self._store, src, dst, overwrite=False)
                return True
            except (AlreadyExistsError, PreconditionError):
                return False
            except (NotSupportedError, NotImplementedError):
                return self.create_exclusive(dst, self.read_bytes(src))

    def rename(self, src: str, dst: str, *, overwrite: bool = True) -> bool:
        if not self.copy(src, dst, overwrite=overwrite):
            return False
        self.delete(src)
        return True

    # ------------------------------------------------------------------ pyarrow

    def _make_pyarrow_fs(self) -> tuple[pyarrow.fs.FileSystem, str]:
        import pyarrow.fs as pafs

        with self._errors("pyarrow filesystem", ""):
            o = {k.lower(): str(v) for k, v in self.storage_options.items()}
            parts = urlsplit(self._url)
            if self.kind == "s3":
                kw: dict[str, Any] = {"access_key": o.get("aws_access_key_id"),
                                      "secret_key": o.get("aws_secret_access_key"),
                                      "session_token": o.get("aws_session_token") or o.get("aws_token"),
                                      "region": o.get("aws_region") or o.get("aws_default_region")}
                endpoint = o.get("aws_endpoint_url") or o.get("aws_endpoint") or o.get("endpoint")
                if endpoint:
                    ep = urlsplit(endpoint)
                    kw["endpoint_override"], kw["scheme"] = ep.netloc or ep.path, ep.scheme or "https"
                    kw["region"] = kw["region"] or "us-east-1"  # no region lookup against AWS
                if o.get("aws_virtual_hosted_style_request", "").lower() == "true":
                    kw["force_virtual_addressing"] = True
                fs = pafs.S3FileSystem(**{k: v for k, v in kw.items() if v is not None})
                return fs, f"{parts.netloc}{parts.path}".rstrip("/")
            if self.kind == "azure":
                container, _, account_host = parts.netloc.partition("@")
                account = o.get("azure_storage_account_name") or o.get("account_name") or account_host.split(".")[0]
                kw = {"account_name": account,
                      "account_key": o.get("azure_storage_account_key") or o.get("account_key"),
                      "sas_token": o.get("azure_storage_sas_key") or o.get("azure_storage_sas_token")}
                endpoint = o.get("azure_endpoint") or o.get("azure_storage_endpoint")
                if o.get("azure_storage_use_emulator", "").lower() == "true":
                    endpoint = os.environ.get("AZURITE_BLOB_STORAGE_URL", "http://127.0.0.1:10000")
                if endpoint:
                    ep = urlsplit(endpoint)
                    kw.update(blob_storage_authority=ep.netloc, blob_storage_scheme=ep.scheme,
                              dfs_storage_authority=ep.netloc, dfs_storage_scheme=ep.scheme)
                fs = pafs.AzureFileSystem(**{k: v for k, v in kw.items() if v is not None})
                return fs, f"{container}{parts.path}".rstrip("/")
            fs = pafs.GcsFileSystem()
            return fs, f"{parts.netloc}{parts.path}".rstrip("/")


register_backend("object_store", ObjectStoreStorage)
