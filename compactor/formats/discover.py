"""Find Delta tables (dirs with _delta_log) and file-sink outputs (dirs with _spark_metadata) under a root."""

from __future__ import annotations

import fnmatch
import os
from pathlib import Path
from typing import Mapping, Sequence

from compactor.errors import TableReadError
from compactor.runtime.paths import is_uri

MARKERS = {"delta": "_delta_log", "spark_file_sink": "_spark_metadata"}


def discover_tables(root: str, include: Sequence[str] = ("**",), exclude: Sequence[str] = (),
                    storage_options: Mapping[str, str] | None = None, *, fmt: str = "delta") -> list[str]:
    """Relative paths (posix) of tables below root, filtered by include/exclude globs.

    storage_options are accepted for object stores, which are not listed yet (a clear error says so)."""
    if is_uri(root):
        raise TableReadError(f"discover on object stores is not supported yet: {root}",
                             hint="list the tables with `path:` instead")
    base = Path(root)
    if not base.is_dir():
        raise TableReadError(f"discover root does not exist: {root}")
    marker = MARKERS[fmt]
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


def _glob_any(rel: str, patterns: Sequence[str]) -> bool:
    return any(fnmatch.fnmatchcase(rel, p) or (p == "**") for p in patterns)
