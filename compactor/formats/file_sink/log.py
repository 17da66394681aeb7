"""Read Spark's metadata logs (`_spark_metadata` of a file sink, `sources/N` of a checkpoint) as Spark does.

Files are named `N` or `N.compact`; content is a `v1` line then one JSON object per line. The compact
interval is not stored: it is derived from the two newest `.compact` names. The visible entries are those
of the latest compaction batch plus the plain batches after it. Names that do not parse are ignored.

A log directory is a local path or an object-store URI (read through ``runtime.storage`` with the
table's storage options); ``MetadataLog.read_table``/``read_entries`` read one of its files either way.
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path, PurePath, PurePosixPath
from typing import Any
from urllib.parse import unquote, urlparse

import pyarrow as pa

from compactor.errors import TableReadError
from compactor.runtime.paths import is_remote
from compactor.runtime.storage import Storage, storage_for

_NAME = re.compile(r"^(\d+)(\.compact)?$")


@dataclass(frozen=True)
class LogFile:
    """One file of a metadata log: batch ``N`` (``N.compact`` when ``compact``), its size, mtime and ETag."""

    batch: int
    compact: bool
    #: local disk: the file; object stores: just its name (``location`` is its URI)
    path: PurePath
    size: int
    mtime_ms: int
    e_tag: str | None = None
    location: str = ""

    @property
    def name(self) -> str:
        return self.path.name


@dataclass
class MetadataLog:
    """One metadata log directory and its files (``list_log``); ``storage`` reads them on object stores."""

    directory: Path | str
    files: list[LogFile] = field(default_factory=list)
    storage: Storage | None = None

    def read_bytes(self, lf: LogFile) -> bytes:
        if self.storage is None:
            return Path(lf.path).read_bytes()
        return self.storage.read_bytes(lf.name)

    def read_table(self, lf: LogFile, schema: pa.Schema) -> pa.Table:
        return parse_entries_table(self.read_bytes(lf), lf.location or str(lf.path), schema)

    def read_entries(self, lf: LogFile) -> list[dict[str, Any]]:
        return parse_entries(self.read_bytes(lf), lf.location or str(lf.path))

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


def list_log(directory: Path | str, storage_options: Mapping[str, str] | None = None) -> MetadataLog:
    """The files of one metadata log directory (a local path or an object-store URI): one listing."""
    where = str(directory)
    storage = storage_for(where, storage_options) if is_remote(where) else None
    log = MetadataLog(Path(directory) if storage is None else where.rstrip("/"), storage=storage)
    if storage is None:
        st = storage_for(where)
        if not Path(directory).is_dir():
            raise TableReadError(f"{directory}: no metadata log directory")
    else:
        st = storage
    objects, _ = st.list_dir("")
    if storage is not None and not objects and not st.list_dir("")[1]:
        raise TableReadError(f"{directory}: no metadata log directory")
    for o in objects:
        name = o.path.rsplit("/", 1)[-1]
        m = _NAME.match(name)
        if not m:
            continue  # dot-files, .crc, temp files, folders: ignored, as Spark does
        path: PurePath = Path(directory) / name if storage is None else PurePosixPath(name)
        location = str(path) if storage is None else f"{log.directory}/{name}"
        log.files.append(LogFile(int(m.group(1)), bool(m.group(2)), path, o.size, int(o.mtime * 1000), o.e_tag,
                                 location))
    return log


def parse_entries(data: bytes, where: str) -> list[dict[str, Any]]:
    """Entries of one log file's content. Empty file: Spark's 'Incomplete log file' error."""
    lines = data.decode("utf-8").split("\n")
    header = lines[0].rstrip("\r")
    if not header:
        raise TableReadError(f"{where}: incomplete log file (empty)")
    if not header.startswith("v"):
        raise TableReadError(f"{where}: not a metadata log file (header {header[:20]!r})")
    return [json.loads(ln) for ln in (x.strip() for x in lines[1:]) if ln]


def read_entries(path: Path) -> list[dict[str, Any]]:
    """Entries of one local log file."""
    return parse_entries(Path(path).read_bytes(), str(path))


_SINK_SCHEMA = pa.schema([("path", pa.string()), ("size", pa.int64()), ("modificationTime", pa.int64()),
                          ("action", pa.string())])
_SOURCE_SCHEMA = pa.schema([("path", pa.string()), ("timestamp", pa.int64()), ("batchId", pa.int64())])


def read_entries_table(path: Path, schema: pa.Schema) -> pa.Table:
    """Entries of one local log file as columns."""
    return parse_entries_table(Path(path).read_bytes(), str(path), schema)


def parse_entries_table(data: bytes, path: str, schema: pa.Schema) -> pa.Table:
    """Entries of one log file's content as columns, parsed by pyarrow's JSON reader (millions of lines in C++)."""
    import io

    import pyarrow.json as pj

    nl = data.find(b"\n")
    header = data if nl < 0 else data[:nl]
    if not data:
        raise TableReadError(f"{path}: incomplete log file (empty)")
    if not header.startswith(b"v"):
        raise TableReadError(f"{path}: not a metadata log file (header {header[:20]!r})")
    body = b"" if nl < 0 else data[nl + 1:]
    if not body.strip():
        return schema.empty_table()
    opts = pj.ParseOptions(explicit_schema=schema, unexpected_field_behavior="ignore")
    try:
        t = pj.read_json(io.BytesIO(body), parse_options=opts, read_options=pj.ReadOptions(block_size=1 << 24))
    except pa.ArrowInvalid as e:
        raise TableReadError(f"{path}: unparsable log entry: {e}") from e
    return t.select(schema.names)


def source_entries_table(log: MetadataLog) -> pa.Table:
    """Visible entries of a checkpoint source log (`sources/N`): path, timestamp, batchId."""
    parts = [log.read_table(lf, _SOURCE_SCHEMA) for lf in log.visible_files()]
    return pa.concat_tables(parts) if parts else _SOURCE_SCHEMA.empty_table()


def entry_local_path(raw: str, base: Path) -> Path:
    """Filesystem path of a manifest entry (URIs are URL-encoded since Spark 3.5)."""
    u = urlparse(raw)
    if u.scheme in ("file", ""):
        p = Path(unquote(u.path)) if u.scheme == "file" else Path(raw)
        return p if p.is_absolute() else base / p
    raise TableReadError(f"{raw}: only local file sinks are supported by this version")


def sink_entries_table(log: MetadataLog) -> pa.Table:
    """Visible sink entries as columns: raw_path (as written), size_bytes, modification_time, batch,
    in_compact, action. A path listed twice is kept once (first listing wins)."""
    tables = []
    for lf in log.visible_files():
        t = log.read_table(lf, _SINK_SCHEMA)
        n = t.num_rows
        tables.append(pa.table({"raw_path": t.column("path"), "size_bytes": t.column("size").fill_null(0),
                                "modification_time": t.column("modificationTime").fill_null(0),
                                "batch": pa.array([lf.batch] * n, pa.int64()),
                                "in_compact": pa.array([lf.compact] * n, pa.bool_()),
                                "action": t.column("action").fill_null("add")}))
    if not tables:
        return pa.table({"raw_path": pa.array([], pa.string()), "size_bytes": pa.array([], pa.int64()),
                         "modification_time": pa.array([], pa.int64()), "batch": pa.array([], pa.int64()),
                         "in_compact": pa.array([], pa.bool_()), "action": pa.array([], pa.string())})
    t = pa.concat_tables(tables)
    seen: set[str] = set()
    keep = []
    for p in t.column("raw_path").to_pylist():
        keep.append(p not in seen)
        seen.add(p)
    return t.filter(pa.array(keep, pa.bool_()))
