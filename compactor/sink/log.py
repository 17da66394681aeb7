"""Read Spark's metadata logs (`_spark_metadata` of a file sink, `sources/N` of a checkpoint) as Spark does.

Files are named `N` or `N.compact`; content is a `v1` line then one JSON object per line. The compact
interval is not stored: it is derived from the two newest `.compact` names. The visible entries are those
of the latest compaction batch plus the plain batches after it. Names that do not parse are ignored.
"""

from __future__ import annotations

import json
import os
import re
from dataclasses import dataclass, field
from pathlib import Path
from urllib.parse import unquote, urlparse

import pyarrow as pa

from compactor.errors import TableReadError

_NAME = re.compile(r"^(\d+)(\.compact)?$")


@dataclass(frozen=True)
class LogFile:
    batch: int
    compact: bool
    path: Path
    size: int
    mtime_ms: int


@dataclass
class MetadataLog:
    directory: Path
    files: list[LogFile] = field(default_factory=list)

    @property
    def latest_batch(self) -> int | None:
        return max((f.batch for f in self.files), default=None)

    @property
    def compacts(self) -> list[LogFile]:
        return sorted((f for f in self.files if f.compact), key=lambda f: f.batch)

    def compact_interval(self, default: int = 10) -> int:
        """As Spark derives it: from the two newest .compact batch ids (or the configured default)."""
        c = self.compacts
        if len(c) >= 2:
            return c[-1].batch - c[-2].batch
        if len(c) == 1:
            return c[0].batch + 1
        return default

    @property
    def latest_compact(self) -> LogFile | None:
        c = self.compacts
        return c[-1] if c else None

    def visible_files(self) -> list[LogFile]:
        """The latest compaction batch plus the plain batches after it, in batch order."""
        lc = self.latest_compact
        start = lc.batch if lc else -1
        plain = sorted((f for f in self.files if not f.compact and f.batch > start), key=lambda f: f.batch)
        return ([lc] if lc else []) + plain

    @property
    def newest_mtime_ms(self) -> int | None:
        return max((f.mtime_ms for f in self.files), default=None)


def list_log(directory: Path) -> MetadataLog:
    log = MetadataLog(Path(directory))
    if not log.directory.is_dir():
        raise TableReadError(f"{directory}: no metadata log directory")
    with os.scandir(log.directory) as it:
        for e in it:
            m = _NAME.match(e.name)
            if not m or not e.is_file():
                continue  # dot-files, .crc, temp files: ignored, as Spark does
            st = e.stat()
            log.files.append(LogFile(int(m.group(1)), bool(m.group(2)), Path(e.path), st.st_size, int(st.st_mtime * 1000)))
    return log


def read_entries(path: Path) -> list[dict]:
    """Entries of one log file. Empty file: Spark's 'Incomplete log file' error."""
    with open(path, encoding="utf-8") as f:
        header = f.readline().rstrip("\n")
        if not header:
            raise TableReadError(f"{path}: incomplete log file (empty)")
        if not header.startswith("v"):
            raise TableReadError(f"{path}: not a metadata log file (header {header[:20]!r})")
        out = []
        for line in f:
            line = line.strip()
            if line:
                out.append(json.loads(line))
        return out


def entry_local_path(raw: str, base: Path) -> Path:
    """Filesystem path of a manifest entry (URIs are URL-encoded since Spark 3.5)."""
    u = urlparse(raw)
    if u.scheme in ("file", ""):
        p = Path(unquote(u.path)) if u.scheme == "file" else Path(raw)
        return p if p.is_absolute() else base / p
    raise TableReadError(f"{raw}: only local file sinks are supported by this version")


def sink_entries_table(log: MetadataLog) -> pa.Table:
    """Visible sink entries as columns: path (as written), size, modificationTime, batch, in_compact."""
    paths, sizes, mtimes, batches, in_compact = [], [], [], [], []
    seen: dict[str, int] = {}
    for lf in log.visible_files():
        for e in read_entries(lf.path):
            if e.get("action", "add") != "add":
                continue  # "delete" entries are ignored by Spark since 3.1 (never written by us)
            p = e["path"]
            if p in seen:
                continue
            seen[p] = len(paths)
            paths.append(p)
            sizes.append(int(e.get("size", 0)))
            mtimes.append(int(e.get("modificationTime", 0)))
            batches.append(lf.batch)
            in_compact.append(lf.compact)
    return pa.table({"raw_path": pa.array(paths, pa.string()), "size_bytes": pa.array(sizes, pa.int64()),
                     "modification_time": pa.array(mtimes, pa.int64()), "batch": pa.array(batches, pa.int64()),
                     "in_compact": pa.array(in_compact, pa.bool_())})
