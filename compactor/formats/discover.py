"""Find Delta tables (dirs with _delta_log) and file-sink outputs (dirs with _spark_metadata) under a root:
a local directory or an object-store prefix (listed folder by folder, one delimiter listing each); and
the format of the table at one path (``format_at``)."""

from __future__ import annotations

import fnmatch
import os
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING

from compactor.errors import TableReadError
from compactor.formats import get_format
from compactor.models.formats import DEFAULT_FORMAT, FORMATS, format_spec
from compactor.runtime.paths import is_remote, local_path
from compactor.runtime.storage import storage_for

if TYPE_CHECKING:  # pragma: no cover
    from compactor.formats.base import TableFormat

#: an object-store walk stops after listing this many folders (a prefix holding a whole data lake)
MAX_REMOTE_FOLDERS = 100_000


def format_at(path: str, storage_options: Mapping[str, str] | None = None) -> TableFormat | None:
    """The format of the table at ``path`` (a local path or an object-store URI): the first registered
    format whose marker folder (``_delta_log``, ``_spark_metadata``) is directly under it; None: no table."""
    st = storage_for(path, storage_options)
    spec = next((f for f in FORMATS if st.is_dir(f.marker)), None)
    return None if spec is None else get_format(spec.name)


def discover_tables(root: str, include: Sequence[str] = ("**",), exclude: Sequence[str] = (),
                    storage_options: Mapping[str, str] | None = None, *, fmt: str = DEFAULT_FORMAT) -> list[str]:
    """Relative paths (posix) of tables below root, filtered by include/exclude globs. ``root`` may be an
    object-store URI (``storage_options`` reach it); a table's sub-folders are never listed."""
    if is_remote(root):
        return _discover_remote(root, include, exclude, storage_options, _marker(fmt))
    base = Path(local_path(root))
    if not base.is_dir():
        raise TableReadError(f"discover root does not exist: {root}")
    marker = _marker(fmt)
    found: list[str] = []
    for dirpath, dirnames, _ in os.walk(base):
        if marker in dirnames:
            rel = Path(dirpath).relative_to(base).as_posix()
            rel = "." if rel == "" else rel
            dirnames[:] = []  # a table's sub-directories are partitions, not tables
            if _glob_any(rel, include) and not _glob_any(rel, exclude):
                found.append(rel)
            continue
        dirnames[:] = sorted(d for d in dirnames if not d.startswith(("_", ".")))
    return sorted(found)


def _marker(fmt: str) -> str:
    spec = format_spec(fmt)
    if spec is None:
        raise TableReadError(f"unknown table format {fmt!r}")
    return spec.marker


def _glob_any(rel: str, patterns: Sequence[str]) -> bool:
    return any(fnmatch.fnmatchcase(rel, p) or (p == "**") for p in patterns)


def _discover_remote(root: str, include: Sequence[str], exclude: Sequence[str],
                     storage_options: Mapping[str, str] | None, marker: str) -> list[str]:
    storage = storage_for(root, storage_options)
    found: list[str] = []
    queue = [""]
    listed = 0
    while queue:
        folder = queue.pop()
        listed += 1
        if listed > MAX_REMOTE_FOLDERS:
            raise TableReadError(f"discover under {root}: more than {MAX_REMOTE_FOLDERS} folders; narrow the root")
        objects, dirs = storage.list_dir(folder)
        if listed == 1 and not objects and not dirs:
            raise TableReadError(f"discover root does not exist (nothing under it): {root}")
        names = {d.rsplit("/", 1)[-1]: d for d in dirs}
        if marker in names:
            rel = folder or "."
            if _glob_any(rel, include) and not _glob_any(rel, exclude):
                found.append(rel)
            continue  # a table's sub-folders are partitions, not tables
        queue.extend(d for n, d in sorted(names.items(), reverse=True) if not n.startswith(("_", ".")))
    return sorted(found)
