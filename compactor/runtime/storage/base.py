"""The storage interface: operations on objects under one root URI, on local disk, S3, Azure and GCS.

``Storage.for_uri(uri, storage_options)`` (or ``Storage(uri, storage_options)``) takes the same URIs and
``storage_options`` dict as the table libraries built on object_store (``AWS_ENDPOINT_URL``, ``AWS_ALLOW_HTTP``, ``aws_conditional_put``,
``AZURE_STORAGE_USE_EMULATOR``, ...) and returns the backend for the URI's scheme: ``LocalStorage``
(``local.py``: plain file-system calls) for a path or ``file://`` URI, ``ObjectStoreStorage``
(``object_store.py``: obstore, the Python binding of the Rust ``object_store`` crate those libraries use
too) for ``s3://``, ``s3a://``, ``az://``, ``abfs[s]://``, ``adl://`` and ``gs://``. Both offer the handful
of operations compactor's runtime needs, with paths relative to the root and ``/`` as the separator.

The two operations the lease and the crash journal build on:

- ``create_exclusive(path, data)``: atomic create-if-absent, False when the object exists. Object stores:
  a put with ``If-None-Match: *``. Local disk: the complete content is written to a unique temp file and
  hard-linked into place, so a crash never leaves a half-written file under the final name.
- ``put_if_match(path, data, version)``: replace only if the object is still at ``version`` (as returned by
  ``read_versioned``), False otherwise or when it is gone. Object stores: a put with ``If-Match: <etag>``
  (S3, Azure) or the generation (GCS). Local disk: compare-and-replace (temp file + ``os.replace``) under an
  exclusive ``flock`` on the parent folder: atomic against other compactor processes on the same host that
  use this method; not against a plain ``write_bytes``/``delete`` of the same path.

Storage option values never appear in an error message or log line: errors keep the operation, the
relative path and the store's own first line of explanation with every option value replaced by ``***``
(and every value is registered with ``runtime.secrets`` for the rest of the process).
"""

from __future__ import annotations

import builtins
from abc import ABC, abstractmethod
from collections.abc import Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any
from urllib.parse import urlsplit

from compactor.errors import CompactorError
from compactor.runtime.secrets import _Redactor, register_secrets

if TYPE_CHECKING:
    import pyarrow.fs


class StorageError(CompactorError):
    """A storage operation failed (defined here until compactor.errors gains it)."""

    code = "storage"


class ObjectNotFoundError(StorageError):
    """The object does not exist."""

    code = "not_found"


@dataclass(frozen=True)
class ObjectInfo:
    """One object as ``head`` or a listing reports it (``e_tag``: None where the store gives none)."""

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


def is_local_uri(uri: str) -> bool:
    """A plain path, a ``file://`` URI or a Windows drive path (``C:\\``, ``C:/``)."""
    scheme = urlsplit(uri).scheme.lower()
    return scheme in ("", "file") or (len(scheme) == 1 and uri[1:3] in (":\\", ":/"))


#: the backends by kind ("local", "object_store"): each backend's module registers its class when imported,
#: and compactor/runtime/storage/__init__.py imports them all (so this module imports none of them)
_BACKENDS: dict[str, type[Storage]] = {}


def register_backend(kind: str, cls: type[Storage]) -> None:
    _BACKENDS[kind] = cls


def _backend_for(uri: str) -> type[Storage]:
    """The one place that picks the backend for a URI."""
    if is_local_uri(uri):
        return _BACKENDS["local"]
    scheme = urlsplit(uri).scheme.lower()
    if scheme in SCHEMES:
        return _BACKENDS["object_store"]
    raise StorageError(f"unsupported storage URI scheme {scheme!r} (expected a local path, file://, "
                       "s3://, s3a://, az://, abfs://, abfss:// or gs://)")


class Storage(ABC):
    """Operations on objects under one root URI (see the module docstring). ``Storage(uri, options)``
    returns the backend for ``uri``'s scheme."""

    #: "local", "s3", "azure" or "gcs"
    kind: str
    #: the root: an absolute local path or ``scheme://bucket/path`` (never a query string)
    uri: str

    def __new__(cls, uri: str = "", storage_options: Mapping[str, Any] | None = None) -> Storage:
        # the defaults only serve copy and pickle, which call a backend's __new__ without arguments
        register_secrets(storage_options)  # before anything can fail, even for a URI no backend takes
        return super().__new__(_backend_for(uri) if cls is Storage else cls)

    def __init__(self, uri: str, storage_options: Mapping[str, Any] | None = None) -> None:
        self.storage_options = dict(storage_options or {})
        self._redact = _Redactor(self.storage_options.values())
        self._pyarrow: tuple[pyarrow.fs.FileSystem, str] | None = None

    @classmethod
    def for_uri(cls, uri: str, storage_options: Mapping[str, Any] | None = None) -> Storage:
        return cls(uri, storage_options)

    def __repr__(self) -> str:
        return f"Storage({self.uri!r})"

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
        """The URI (or absolute local path) of ``path``: what a table library or Spark is given."""
        return self.uri if not path else f"{self.uri}/{path.strip('/')}"

    def _folder(self, prefix: str) -> str:
        """``prefix`` without slashes, refusing the root (for deleting a folder)."""
        prefix = prefix.strip("/")
        if not prefix:
            raise StorageError(f"{self.uri}: refusing to delete everything under the root")
        return prefix

    # ------------------------------------------------------------------ reads

    @abstractmethod
    def read_bytes(self, path: str) -> bytes: ...

    @abstractmethod
    def read_versioned(self, path: str) -> tuple[bytes, ObjectVersion]:
        """The content and the version token ``put_if_match`` takes (from the same read)."""

    @abstractmethod
    def head(self, path: str) -> ObjectInfo | None:
        """The object's size and mtime, None when it does not exist."""

    def exists(self, path: str) -> bool:
        return self.head(path) is not None

    @abstractmethod
    def list(self, prefix: str = "") -> builtins.list[ObjectInfo]:
        """Every object under ``prefix`` (a folder, recursively), sorted by path."""

    @abstractmethod
    def list_dir(self, prefix: str = "") -> tuple[builtins.list[ObjectInfo], builtins.list[str]]:
        """The objects directly under the folder ``prefix`` and its sub-folders (relative paths, sorted):
        one listing request with a delimiter on object stores, never a recursive walk."""

    @abstractmethod
    def is_dir(self, prefix: str) -> bool:
        """True when some object lies under the folder ``prefix`` (a local directory exists)."""

    # ------------------------------------------------------------------ writes

    @abstractmethod
    def write_bytes(self, path: str, data: bytes) -> None:
        """Create or overwrite ``path``; readers see the old or the new content, never a mix."""

    @abstractmethod
    def create_exclusive(self, path: str, data: bytes) -> bool:
        """Create ``path`` with ``data`` only if it does not exist (atomic); False if it exists."""

    def put_if_match(self, path: str, data: bytes, version: ObjectVersion) -> bool:
        """Replace ``path`` only if it is still at ``version``; False if it changed or is gone."""
        return self.replace_if_match(path, data, version) is not None

    @abstractmethod
    def replace_if_match(self, path: str, data: bytes, version: ObjectVersion) -> ObjectVersion | None:
        """``put_if_match`` that returns the version just written (None when nothing was written)."""

    @abstractmethod
    def delete_if_match(self, path: str, version: ObjectVersion) -> bool | None:
        """Delete ``path`` only if it is still at ``version``: True if deleted, False if it changed or is
        gone, None where the store offers no conditional delete (object stores through object_store)."""

    @abstractmethod
    def delete(self, path: str, *, missing_ok: bool = True) -> None: ...

    def delete_many(self, paths: Sequence[str]) -> None:
        """Delete each of ``paths`` (a missing one is no error)."""
        for p in paths:
            self.delete(p)

    @abstractmethod
    def delete_prefix(self, prefix: str) -> int:
        """Delete every object under the folder ``prefix`` (a local directory tree); returns how many."""

    @abstractmethod
    def copy(self, src: str, dst: str, *, overwrite: bool = True) -> bool:
        """Copy ``src`` to ``dst``; with ``overwrite=False`` atomically only if ``dst`` is absent (False if
        it exists)."""

    @abstractmethod
    def rename(self, src: str, dst: str, *, overwrite: bool = True) -> bool:
        """Move ``src`` to ``dst``. ``overwrite=False``: False (and ``src`` kept) when ``dst`` exists."""

    # ------------------------------------------------------------------ pyarrow

    def pyarrow_fs(self) -> tuple[pyarrow.fs.FileSystem, str]:
        """A pyarrow filesystem and the root path on it (``pq.read_table(f"{root}/{path}", filesystem=fs)``)."""
        if self._pyarrow is None:
            self._pyarrow = self._make_pyarrow_fs()
        return self._pyarrow

    @abstractmethod
    def _make_pyarrow_fs(self) -> tuple[pyarrow.fs.FileSystem, str]:
        """Build what ``pyarrow_fs`` returns (once per instance)."""
