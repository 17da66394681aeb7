"""Table locations: local paths and URIs (s3://, az://, abfss://, gs://, file://)."""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Any
from urllib.parse import unquote

_URI = re.compile(r"^[a-zA-Z][a-zA-Z0-9+.-]*://")


def is_uri(path: str) -> bool:
    return bool(_URI.match(path))


def is_remote(path: str) -> bool:
    """True for object-store URIs (anything with a scheme other than file://)."""
    return is_uri(path) and not path.startswith("file://")


def local_path(uri: str) -> str:
    """The filesystem path of a local table location (a plain path or a file:// URI)."""
    return unquote(uri[len("file://"):]) if uri.startswith("file://") else uri


def join(root: str, rel: str) -> str:
    """``root`` + "/" + ``rel``; ``rel`` may itself be absolute (a URI), as a table's log may name a file."""
    if is_uri(rel) or rel.startswith("/"):
        return rel
    return f"{root.rstrip('/')}/{rel}" if rel else root.rstrip("/")


_LOCAL_FS: Any = None


def filesystem(location: str, storage_options: Mapping[str, str] | None = None) -> tuple[Any, str]:
    """A pyarrow filesystem and the path inside it for one file or folder location. Object stores: the
    filesystem ``runtime.storage.Storage`` builds from ``storage_options`` (endpoint, credentials,
    region...), one per bucket/container and options, shared by every caller."""
    global _LOCAL_FS
    if not is_remote(location):
        if _LOCAL_FS is None:
            import pyarrow.fs as pafs

            _LOCAL_FS = pafs.LocalFileSystem()
        return _LOCAL_FS, local_path(location)
    from compactor.runtime.storage import locate

    storage, rel = locate(location, storage_options)
    fs, root = storage.pyarrow_fs()
    return fs, f"{root}/{rel}" if rel else root


def hadoop_uri(uri: str) -> str:
    """The URI Hadoop (Spark) knows for ``uri``: ``s3://`` -> ``s3a://`` (open-source Hadoop registers no
    ``s3`` filesystem; the S3A connector serves both). Other locations are returned unchanged."""
    return "s3a://" + uri[len("s3://"):] if uri.startswith("s3://") else uri
