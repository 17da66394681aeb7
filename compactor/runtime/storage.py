"""One storage layer for table roots on local disk, S3, Azure and GCS.

``Storage.for_uri(uri, storage_options)`` takes the same URIs and ``storage_options`` dict as delta-rs
(``AWS_ENDPOINT_URL``, ``AWS_ALLOW_HTTP``, ``aws_conditional_put``, ``AZURE_STORAGE_USE_EMULATOR``, ...) and
offers the handful of operations compactor's runtime needs, with paths relative to that root and ``/`` as
the separator. Object stores go through obstore (the Python binding of the Rust ``object_store`` crate
that delta-rs itself uses); local paths use plain file-system calls.

The two operations the lease and the crash journal build on:

- ``create_exclusive(path, data)``: atomic create-if-absent, False when the object exists. Object stores:
  a put with ``If-None-Match: *``. Local disk: the complete content is written to a unique temp file and
  hard-linked into place, so a crash never leaves a half-written file under the final name.
- ``put_if_match(path, data, version)``: replace only if the object is still at ``version`` (as returned by
  ``read_versioned``), False otherwise or when it is gone. Object stores: a put with ``If-Match: <etag>``
  (S3, Azure) or the generation (GCS). Local disk: compare-and-replace (temp file + ``os.replace``) under an
  exclusive ``flock`` on a sibling ``.<name>.lock`` file: atomic against other compactor processes on the
  same host that use this method; not against a plain ``write_bytes``/``delete`` of the same path.

Storage option values never appear in an error message or log line: errors keep the operation, the
relative path and the store's own first line of explanation with every option value replaced by ``***``.
"""

from __future__ import annotations

import builtins
import errno
import fcntl
import hashlib
import logging
import os
import re
import shutil
import threading
import uuid
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass
from datetime import timedelta
from pathlib import Path
from typing import TYPE_CHECKING, Any
from urllib.parse import unquote, urlsplit

from compactor.errors import CompactorError
from compactor.runtime.secrets import (  # noqa: F401 - re-exported for compatibility
    RedactingFilter,
    _Redactor,
    error_text,
    install_log_redaction,
    redact,
    redact_error,
    register_secrets,
)

if TYPE_CHECKING:
    import pyarrow.fs

log = logging.getLogger(__name__)


class StorageError(CompactorError):
    """A storage operation failed (defined here until compactor.errors gains it)."""

    code = "storage"


class ObjectNotFoundError(StorageError):
    """The object does not exist."""

    code = "not_found"


@dataclass(frozen=True)
class ObjectInfo:
    path: str  # relative to the storage root
    size: int
    mtime: float  # seconds since the epoch
    e_tag: str | None = None


@dataclass(frozen=True)
class ObjectVersion:
    """Opaque token naming one version of an object, for ``put_if_match``."""

    e_tag: str | None
    version: str | None = None


#: URI schemes and the backend each maps to
SCHEMES = {"s3": "s3", "s3a": "s3", "az": "azure", "azure": "azure", "abfs": "azure", "abfss": "azure",
           "adl": "azure", "gs": "gcs"}
#: object_store client options (not store config); accepted bare or with a store prefix
_CLIENT_KEYS = {"allow_http", "allow_invalid_certificates", "connect_timeout", "default_content_type", "http1_only",
                "http2_keep_alive_interval", "http2_keep_alive_timeout", "http2_keep_alive_while_idle",
                "http2_max_frame_size", "http2_only", "pool_idle_timeout", "pool_max_idle_per_host", "proxy_url",
                "proxy_ca_certificate", "proxy_excludes", "randomize_addresses", "timeout", "user_agent"}
_PREFIXES = ("aws_", "azure_storage_", "azure_", "google_", "gcs_")
#: keys delta-rs understands (log stores, locking) that object_store does not
_DELTA_ONLY = {"aws_s3_allow_unsafe_rename", "aws_s3_locking_provider", "delta_dynamo_table_name",
               "dynamo_lock_table_name", "aws_ec2_metadata_disabled", "mount_allow_unsafe_rename",
               "max_retries", "retry_timeout"}


def _parse_duration(value: str) -> timedelta:
    m = re.fullmatch(r"\s*(\d+(?:\.\d+)?)\s*(ms|s|m|h)?\s*", str(value))
    if not m:
        raise StorageError("retry_timeout: expected a duration such as 30s, 500ms or 2m")
    n, unit = float(m.group(1)), m.group(2) or "s"
    return timedelta(seconds=n * {"ms": 0.001, "s": 1, "m": 60, "h": 3600}[unit])


def split_options(storage_options: Mapping[str, Any]) -> tuple[dict[str, str], dict[str, Any], dict[str, Any]]:
    """delta-rs style ``storage_options`` -> obstore (config, client_options, retry_config)."""
    config: dict[str, str] = {}
    client: dict[str, Any] = {}
    retry: dict[str, Any] = {}
    for key, value in storage_options.items():
        k = key.lower()
        bare = next((k[len(p):] for p in _PREFIXES if k.startswith(p) and k[len(p):] in _CLIENT_KEYS), k)
        if bare in _CLIENT_KEYS:
            client[bare] = str(value)
        elif k == "max_retries":
            retry["max_retries"] = int(value)
        elif k == "retry_timeout":
            retry["retry_timeout"] = _parse_duration(value)
        elif k in _DELTA_ONLY:
            log.debug("storage option %s is for delta-rs only; not passed to the object store", key)
        else:
            config[k] = str(value)
    return config, client, retry


class Storage:
    """Operations on objects under one root URI (see the module docstring)."""

    def __init__(self, uri: str, storage_options: Mapping[str, Any] | None = None) -> None:
        self.storage_options = dict(storage_options or {})
        self._redact = _Redactor(self.storage_options.values())
        self._pyarrow: tuple[pyarrow.fs.FileSystem, str] | None = None
        register_secrets(self.storage_options)
        parts = urlsplit(uri)
        scheme = parts.scheme.lower()
        if scheme in ("", "file") or (len(scheme) == 1 and uri[1:3] in (":\\", ":/")):  # plain path / C:\
            path = parts.path if scheme == "file" else uri
            self.kind = "local"
            self.uri = str(Path(path).expanduser().absolute())
            self._root = Path(self.uri)
            self._store = None
        elif scheme in SCHEMES:
            self.kind = SCHEMES[scheme]
            # s3a is Hadoop's name for the same store; query strings (SAS tokens) are never shown
            self.uri = ("s3" if scheme == "s3a" else scheme) + "://" + parts.netloc + parts.path.rstrip("/")
            self._url = uri.split("?", 1)[0].rstrip("/")
            self._store = self._open_store()
        else:
            raise StorageError(f"unsupported storage URI scheme {scheme!r} (expected a local path, file://, "
                               "s3://, s3a://, az://, abfs://, abfss:// or gs://)")

    @classmethod
    def for_uri(cls, uri: str, storage_options: Mapping[str, Any] | None = None) -> Storage:
        return cls(uri, storage_options)

    def __repr__(self) -> str:
        return f"Storage({self.uri!r})"

    # ------------------------------------------------------------------ setup

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

    @contextmanager
    def _errors(self, op: str, path: str) -> Iterator[None]:
        """Turn backend exceptions (obstore's, OSError, pyo3 panics) into StorageError without option values."""
        try:
            yield
        except CompactorError:
            raise
        except (KeyboardInterrupt, SystemExit, GeneratorExit):
            raise
        except BaseException as e:  # noqa: BLE001 - pyo3's PanicException derives from BaseException
            name = type(e).__name__
            first = (str(e).strip().splitlines() or [""])[0][:300]
            msg = self._redact(f"{self.uri}: {op} {path!r} failed: {name}: {first}")
            cls = ObjectNotFoundError if isinstance(e, FileNotFoundError) else StorageError
            raise cls(msg) from None

    # ------------------------------------------------------------------ paths

    @staticmethod
    def join(*parts: str) -> str:
        """Join relative path segments with ``/`` (no leading slash)."""
        return "/".join(p.strip("/") for p in parts if p and p.strip("/"))

    def full_uri(self, path: str = "") -> str:
        """The URI (or absolute local path) of ``path``: what delta-rs or Spark are given."""
        return self.uri if not path else f"{self.uri}/{path.strip('/')}"

    def _local(self, path: str) -> Path:
        p = self._root / path.strip("/") if path else self._root
        return p

    # ------------------------------------------------------------------ reads

    def read_bytes(self, path: str) -> bytes:
        if self._store is None:
            with self._errors("read", path):
                return self._local(path).read_bytes()
        return self.read_versioned(path)[0]

    def read_versioned(self, path: str) -> tuple[bytes, ObjectVersion]:
        """The content and the version token ``put_if_match`` takes (from the same read)."""
        with self._errors("read", path):
            if self._store is None:
                data = self._local(path).read_bytes()
                return data, ObjectVersion(hashlib.sha256(data).hexdigest())
            import obstore

            r = obstore.get(self._store, path)
            return bytes(r.bytes()), ObjectVersion(r.meta.get("e_tag"), r.meta.get("version"))

    def head(self, path: str) -> ObjectInfo | None:
        try:
            with self._errors("head", path):
                if self._store is None:
                    st = self._local(path).stat()
                    return ObjectInfo(path, st.st_size, st.st_mtime)
                import obstore

                m = obstore.head(self._store, path)
                return ObjectInfo(m["path"], m["size"], m["last_modified"].timestamp(), m.get("e_tag"))
        except ObjectNotFoundError:
            return None

    def exists(self, path: str) -> bool:
        return self.head(path) is not None

    def list(self, prefix: str = "") -> list[ObjectInfo]:
        """Every object under ``prefix`` (a folder, recursively), sorted by path."""
        with self._errors("list", prefix):
            if self._store is None:
                base = self._local(prefix)
                out = []
                for dirpath, _dirs, files in os.walk(base):
                    for f in files:
                        p = Path(dirpath) / f
                        try:
                            st = p.stat()
                        except FileNotFoundError:  # deleted while listing
                            continue
                        out.append(ObjectInfo(p.relative_to(self._root).as_posix(), st.st_size, st.st_mtime))
                return sorted(out, key=lambda o: o.path)
            import obstore

            out = [ObjectInfo(m["path"], m["size"], m["last_modified"].timestamp(), m.get("e_tag"))
                   for batch in obstore.list(self._store, prefix.strip("/") or None) for m in batch]
            return sorted(out, key=lambda o: o.path)

    def list_dir(self, prefix: str = "") -> tuple[builtins.list[ObjectInfo], builtins.list[str]]:
        """The objects directly under the folder ``prefix`` and its sub-folders (relative paths, sorted):
        one listing request with a delimiter on object stores, never a recursive walk."""
        prefix = prefix.strip("/")
        with self._errors("list", prefix):
            if self._store is None:
                base = self._local(prefix)
                objects, dirs = [], []
                try:
                    entries = list(os.scandir(base))
                except (FileNotFoundError, NotADirectoryError):
                    return [], []
                for e in entries:
                    rel = f"{prefix}/{e.name}" if prefix else e.name
                    try:
                        if e.is_dir():
                            dirs.append(rel)
                        elif e.is_file():
                            st = e.stat()
                            objects.append(ObjectInfo(rel, st.st_size, st.st_mtime))
                    except FileNotFoundError:  # deleted while listing
                        continue
                return sorted(objects, key=lambda o: o.path), sorted(dirs)
            import obstore

            r = obstore.list_with_delimiter(self._store, prefix or None)
            objects = [ObjectInfo(m["path"], m["size"], m["last_modified"].timestamp(), m.get("e_tag"))
                       for m in r["objects"]]
            return sorted(objects, key=lambda o: o.path), sorted(d.rstrip("/") for d in r["common_prefixes"])

    def is_dir(self, prefix: str) -> bool:
        """True when some object lies under the folder ``prefix`` (a local directory exists)."""
        if self._store is None:
            return self._local(prefix).is_dir()
        objects, dirs = self.list_dir(prefix)
        return bool(objects or dirs)

    # ------------------------------------------------------------------ writes

    def _tmp_sibling(self, p: Path) -> Path:
        return p.with_name(f".{p.name}.{uuid.uuid4().hex}.tmp")

    def _write_tmp(self, p: Path, data: bytes) -> Path:
        p.parent.mkdir(parents=True, exist_ok=True)
        tmp = self._tmp_sibling(p)
        with open(tmp, "wb") as f:
            f.write(data)
            f.flush()
            os.fsync(f.fileno())
        return tmp

    def write_bytes(self, path: str, data: bytes) -> None:
        """Create or overwrite ``path``; readers see the old or the new content, never a mix."""
        with self._errors("write", path):
            if self._store is None:
                p = self._local(path)
                tmp = self._write_tmp(p, data)
                try:
                    os.replace(tmp, p)
                finally:
                    tmp.unlink(missing_ok=True)
                return
            import obstore

            obstore.put(self._store, path, data, mode="overwrite")

    def create_exclusive(self, path: str, data: bytes) -> bool:
        """Create ``path`` with ``data`` only if it does not exist (atomic); False if it exists."""
        with self._errors("create", path):
            if self._store is None:
                p = self._local(path)
                tmp = self._write_tmp(p, data)
                try:
                    os.link(tmp, p)
                    return True
                except FileExistsError:
                    return False
                finally:
                    tmp.unlink(missing_ok=True)
            import obstore
            from obstore.exceptions import AlreadyExistsError, PreconditionError

            try:
                obstore.put(self._store, path, data, mode="create")
                return True
            except (AlreadyExistsError, PreconditionError):
                return False

    def put_if_match(self, path: str, data: bytes, version: ObjectVersion) -> bool:
        """Replace ``path`` only if it is still at ``version``; False if it changed or is gone."""
        return self.replace_if_match(path, data, version) is not None

    def replace_if_match(self, path: str, data: bytes, version: ObjectVersion) -> ObjectVersion | None:
        """``put_if_match`` that returns the version just written (None when nothing was written)."""
        with self._errors("conditional put", path):
            if self._store is None:
                p = self._local(path)
                with _flock(p.parent):
                    try:
                        current = hashlib.sha256(p.read_bytes()).hexdigest()
                    except FileNotFoundError:
                        return None
                    if current != version.e_tag:
                        return None
                    tmp = self._write_tmp(p, data)
                    try:
                        os.replace(tmp, p)
                    finally:
                        tmp.unlink(missing_ok=True)
                    return ObjectVersion(hashlib.sha256(data).hexdigest())
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
        """Delete ``path`` only if it is still at ``version``: True if deleted, False if it changed or is
        gone, None where the store offers no conditional delete (object stores through object_store)."""
        if self._store is not None:
            return None
        with self._errors("conditional delete", path):
            p = self._local(path)
            with _flock(p.parent):
                try:
                    current = hashlib.sha256(p.read_bytes()).hexdigest()
                except FileNotFoundError:
                    return False
                if current != version.e_tag:
                    return False
                p.unlink()
                return True

    def delete(self, path: str, *, missing_ok: bool = True) -> None:
        with self._errors("delete", path):
            if self._store is None:
                try:
                    self._local(path).unlink()
                except FileNotFoundError:
                    if not missing_ok:
                        raise
                return
            import obstore

            if not missing_ok and self.head(path) is None:
                raise ObjectNotFoundError(self._redact(f"{self.uri}: delete {path!r}: no such object"))
            try:
                obstore.delete(self._store, path)
            except FileNotFoundError:  # Azure answers 404 for a missing blob; S3 does not tell
                if not missing_ok:
                    raise

    def delete_prefix(self, prefix: str) -> int:
        """Delete every object under the folder ``prefix`` (a local directory tree); returns how many."""
        prefix = prefix.strip("/")
        if not prefix:
            raise StorageError(f"{self.uri}: refusing to delete everything under the root")
        with self._errors("delete folder", prefix):
            if self._store is None:
                d = self._local(prefix)
                if not d.is_dir():
                    return 0
                n = sum(len(files) for _, _, files in os.walk(d))
                shutil.rmtree(d, ignore_errors=True)
                return n
            import obstore

            paths = [m["path"] for batch in obstore.list(self._store, prefix) for m in batch]
            for i in range(0, len(paths), 1000):
                try:
                    obstore.delete(self._store, paths[i:i + 1000])
                except FileNotFoundError:  # Azure: deleted concurrently
                    for q in paths[i:i + 1000]:
                        self.delete(q)
            return len(paths)

    def copy(self, src: str, dst: str, *, overwrite: bool = True) -> bool:
        """Copy ``src`` to ``dst``; with ``overwrite=False`` atomically only if ``dst`` is absent (False if
        it exists). Object stores copy server-side; a store without copy-if-absent (S3 without
        ``aws_copy_if_not_exists``) downloads ``src`` and creates ``dst`` with If-None-Match."""
        with self._errors("copy", f"{src} -> {dst}"):
            if self._store is None:
                s, d = self._local(src), self._local(dst)
                d.parent.mkdir(parents=True, exist_ok=True)
                tmp = self._tmp_sibling(d)
                try:
                    shutil.copyfile(s, tmp)
                    if overwrite:
                        os.replace(tmp, d)
                        return True
                    try:
                        os.link(tmp, d)
                        return True
                    except FileExistsError:
                        return False
                finally:
                    tmp.unlink(missing_ok=True)
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
        """Move ``src`` to ``dst``. Atomic on local disk; on object stores a copy then a delete (a crash in
        between leaves both). ``overwrite=False``: False (and ``src`` kept) when ``dst`` exists."""
        with self._errors("rename", f"{src} -> {dst}"):
            if self._store is None:
                s, d = self._local(src), self._local(dst)
                d.parent.mkdir(parents=True, exist_ok=True)
                if overwrite:
                    os.replace(s, d)
                    return True
                try:
                    os.link(s, d)
                except FileExistsError:
                    return False
                s.unlink()
                return True
        if not self.copy(src, dst, overwrite=overwrite):
            return False
        self.delete(src)
        return True

    # ------------------------------------------------------------------ pyarrow

    def pyarrow_fs(self) -> tuple[pyarrow.fs.FileSystem, str]:
        """A pyarrow filesystem and the root path on it (``pq.read_table(f"{root}/{path}", filesystem=fs)``)."""
        if self._pyarrow is None:
            self._pyarrow = self._make_pyarrow_fs()
        return self._pyarrow

    def _make_pyarrow_fs(self) -> tuple[pyarrow.fs.FileSystem, str]:
        import pyarrow.fs as pafs

        with self._errors("pyarrow filesystem", ""):
            if self._store is None:
                return pafs.LocalFileSystem(), self._root.as_posix()
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


# ---------------------------------------------------------------------- shared instances

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
    st = Storage(uri, storage_options)
    with _CACHE_LOCK:
        if len(_CACHE) >= _CACHE_MAX:
            _CACHE.pop(next(iter(_CACHE)))
        return _CACHE.setdefault(key, st)


def locate(location: str, storage_options: Mapping[str, Any] | None = None) -> tuple[Storage, str]:
    """The shared Storage of the bucket/container (object stores) or of ``/`` (local disk) that holds
    ``location``, and the path of ``location`` relative to it. Object-store paths are taken literally
    (Delta paths are logical: a ``%`` in them is a ``%`` in the key); ``file://`` URIs are decoded."""
    parts = urlsplit(location)
    scheme = parts.scheme.lower()
    if scheme in SCHEMES:
        path = location.split("?", 1)[0][len(scheme) + 3 + len(parts.netloc):]
        return storage_for(f"{scheme}://{parts.netloc}", storage_options), path.strip("/")
    path = unquote(parts.path) if scheme == "file" else location
    p = Path(path).expanduser().absolute()
    return storage_for(p.anchor or "/"), p.as_posix()[len(p.anchor or "/"):]


@contextmanager
def _flock(folder: Path) -> Iterator[None]:
    """An exclusive lock on ``folder`` itself (flock works on a directory's descriptor), so no lock file
    is ever left behind."""
    folder.mkdir(parents=True, exist_ok=True)
    fd = os.open(folder, os.O_RDONLY)
    try:
        while True:
            try:
                fcntl.flock(fd, fcntl.LOCK_EX)
                break
            except OSError as e:  # interrupted by a signal: try again
                if e.errno != errno.EINTR:
                    raise
        yield
    finally:
        os.close(fd)
