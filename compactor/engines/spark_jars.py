"""The jars of a Spark session's ``spark.jars.packages`` (a table format's jars), without resolving them again.

Ivy resolves packages at every session start, about 2-3 s even when every jar is in its cache (measured
in docs/benchmarks.md). The first session with a given set of packages resolves them as before, and the
paths of the jars it got are kept in compactor's cache folder (compactor/runtime/user_cache.py); a later
session with the same packages, the same resolution settings (repositories, Ivy settings and folder,
exclusions, the user's own ``spark.jars``) and the same Spark version is given those paths in
``spark.jars`` instead, as spark-submit gives a resolution's jars to the driver and executors, provided
every jar is still there with the size and modification time it had. Anything else resolves as before."""

from __future__ import annotations

import json
import os
from collections.abc import Mapping
from urllib.parse import unquote, urlparse

from compactor.runtime.atomic_file import replace_with
from compactor.runtime.user_cache import cache_dir

#: the session settings that decide what a resolution gives
_KEY_CONF = ("spark.jars.repositories", "spark.jars.ivySettings", "spark.jars.ivy", "spark.jars.excludes",
             "spark.jars")
#: resolutions kept (the newest)
_KEEP = 16


def _file() -> str:
    return str(cache_dir() / "spark-jars.json")


def resolution_key(packages: str, conf: Mapping[str, str]) -> str:
    """What a resolution of ``packages`` depends on, as one string."""
    import pyspark

    return json.dumps([packages, pyspark.__version__, *(conf.get(k) for k in _KEY_CONF)])


def local_stat(uri: str) -> list[int] | None:
    """[size, modification time in ns] of a local jar (a path or a ``file:`` URI); None for anything else."""
    parsed = urlparse(uri)
    if parsed.scheme not in ("", "file") or parsed.netloc not in ("", "localhost"):
        return None
    try:
        st = os.stat(unquote(parsed.path))
    except OSError:
        return None
    return [st.st_size, st.st_mtime_ns]


def _load() -> dict[str, object]:
    try:
        with open(_file(), encoding="utf-8") as f:
            kept = json.load(f)
    except (OSError, ValueError):
        return {}
    return kept if isinstance(kept, dict) else {}


def resolved_jars(key: str) -> str | None:
    """The ``spark.jars`` a resolution for ``key`` gave, when every jar is still as it was; else None."""
    entry = _load().get(key)
    if not isinstance(entry, list) or not entry:
        return None
    uris = []
    for item in entry:
        if not (isinstance(item, list) and len(item) == 3 and isinstance(item[0], str)):
            return None
        if local_stat(item[0]) != item[1:]:
            return None
        uris.append(item[0])
    return ",".join(uris)


def forget(key: str) -> None:
    """Drop what was kept for ``key`` (a session failed to start with it)."""
    kept = _load()
    if kept.pop(key, None) is not None:
        _save(kept)


def remember(key: str, jars: str) -> None:
    """Keep the ``spark.jars`` a session resolved for ``key`` (nothing when one of them is not a local file,
    or when the cache folder cannot be written)."""
    items = []
    for uri in filter(None, (j.strip() for j in jars.split(","))):
        st = local_stat(uri)
        if st is None:
            return
        items.append([uri, *st])
    if not items:
        return
    kept = _load()
    kept.pop(key, None)
    kept[key] = items
    _save(dict(list(kept.items())[-_KEEP:]))


def _save(kept: dict[str, object]) -> None:
    """Write the file whole, by rename (a reader sees the old file or the new one)."""
    path = _file()
    try:
        os.makedirs(os.path.dirname(path), exist_ok=True)
        replace_with(path, json.dumps(kept))
    except OSError:
        pass
