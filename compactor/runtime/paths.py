"""Table locations: local paths and URIs (s3://, az://, abfss://, gs://, file://)."""

from __future__ import annotations

import re
from typing import Any, Mapping
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
    """``root`` + "/" + ``rel``; ``rel`` may itself be absolute (a URI), as Delta logs allow."""
    if is_uri(rel) or rel.startswith("/"):
        return rel
    return f"{root.rstrip('/')}/{rel}" if rel else root.rstrip("/")


def filesystem(location: str, storage_options: Mapping[str, str] | None = None) -> tuple[Any, str]:
    """A pyarrow filesystem and the path inside it for one file or folder location."""
    import pyarrow.fs as pafs

    if not is_remote(location):
        return pafs.LocalFileSystem(), local_path(location)
    fs, path = pafs.FileSystem.from_uri(location)
    return fs, path
