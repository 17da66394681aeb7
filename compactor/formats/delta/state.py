"""Read a Delta table's state with delta-rs, columnar (one pyarrow Table of live files).

Paths: the log stores each file's path URL-encoded (a partition folder ``s=x%2Fy`` is ``s=x%252Fy`` in
the log) and delta-rs' ``get_add_actions`` returns that form, while its ``create_write_transaction``
encodes the paths it is given. So the state holds the decoded, logical path: it names the file on
storage (table root + path) and is what commits must be given.

Partition values are held as the Delta protocol serialises them (strings; null for null): ints and
decimals in plain decimal form, booleans ``true``/``false``, dates ``YYYY-MM-DD``, timestamps as
ISO 8601 in UTC with a ``Z``, timestamp_ntz as ``YYYY-MM-DD HH:MM:SS.ffffff``, floats as the writer
spelled them in the file's folder (``NaN``, ``100000000000000000000``), else as Spark parses them back. Per the protocol an empty
string partition value IS null, and delta-rs reports both as null: they are one partition.
"""

from __future__ import annotations

import bisect
import logging
import math
import os
import re
import string
import sys
from pathlib import Path
from typing import Any
from urllib.parse import quote, unquote

import pyarrow as pa

from compactor.errors import TableReadError
from compactor.formats.delta.facts import DeltaFacts
from compactor.models.state import Protocol, TableState
from compactor.models.table import TableLocation
from compactor.runtime.paths import is_remote, local_path
from compactor.runtime.secrets import error_text, redact, register_secrets
from compactor.runtime.storage.base import ObjectInfo

log = logging.getLogger(__name__)


def _reason(uri: str, e: Exception) -> str:
    """What went wrong, classified by delta-rs' outermost error line; otherwise the whole error chain in
    one line (storage option values redacted: a bad option's value must not reach a plan or a log)."""
    text = redact((str(e).strip().splitlines() or [""])[0])
    if "No table metadata" in text:
        return "corrupt log: no table metadata (metaData action) found"
    if "not a Delta table" in text.lower() or "no files in log segment" in text.lower() or "notATable" in text:
        return "not a Delta table (no readable _delta_log)"
    if "contiguous" in text:
        return "corrupt log: commit versions are not contiguous"
    if "catalog" in text.lower():
        return "unsupported: catalog-managed table (must be read through its catalog)"
    if "protocol" in text.lower() or "Unsupported" in text or "feature" in text.lower():
        return f"unsupported protocol: {error_text(e, 300)}"
    return error_text(e)


#: delta-rs links its own jemalloc, which by default keeps freed pages for ~10 s. Python's allocator
#: cannot reuse them, so a plan's peak memory was delta-rs' transient log replay *plus* the planner's.
#: Returning freed pages at once (0 ms) cut the peak at 1M files from 1.2 GiB to 0.77 GiB, but every page
#: jemalloc reuses then faults in again: after 100 ms, a whole `compactor plan` of 200,000 files takes
#: 1.33 s instead of 1.52 s and of 1M files 3.8-4.5 s instead of 5.2-5.4 s, for a peak 7-15% higher
#: (1M files: 1,023-1,180 MiB instead of 964-1,009). A user's own _RJEM_MALLOC_CONF wins (set
#: ``dirty_decay_ms:0,muzzy_decay_ms:0`` for the lower peak). docs/plan-benchmarks.md.
JEMALLOC_CONF = "dirty_decay_ms:100,muzzy_decay_ms:100"


def configure_delta_rs_allocator() -> bool:
    """Ask delta-rs' jemalloc to return freed memory at once. jemalloc reads its configuration once,
    when deltalake is first loaded, so this only works before that; a user's own setting wins.
    Returns whether the setting will take effect."""
    if "deltalake" in sys.modules:
        return False
    os.environ.setdefault("_RJEM_MALLOC_CONF", JEMALLOC_CONF)
    return True


#: characters delta-rs' create_write_transaction leaves as they are when it encodes a path for the log
#: (measured with deltalake 1.6.6: it encodes space, non-ASCII and "#%*<>?[]^`{|}")
DELTA_RS_SAFE = "/!$&'()+,-.:;=@_~"
#: what a path that needs no look is made of: ASCII letters, digits and DELTA_RS_SAFE
_PLAIN = string.ascii_letters + string.digits + DELTA_RS_SAFE
_PLAIN_BYTES = _PLAIN.encode()
_NEEDS_LOOK = re.compile(f"[^{re.escape(_PLAIN)}]")


def _as_type(arr: Any, typ: pa.DataType) -> Any:
    """``arr`` as ``typ``, cast only where it is not already (a cast loads pyarrow.compute, whose import is
    30-50 ms of a command that needs nothing else from it: docs/benchmarks.md)."""
    return arr if arr.type == typ else arr.cast(typ)


def _all_plain(data: pa.Buffer) -> bool:
    """Whether every byte of ``data`` is one a path needing no look is made of, read a MiB at a time (a
    million paths' bytes are never copied at once)."""
    view, step = memoryview(data), 1 << 20
    return not any(view[k:k + step].tobytes().translate(None, _PLAIN_BYTES) for k in range(0, len(view), step))


def _logical_paths(raw: pa.ChunkedArray | pa.Array) -> tuple[pa.Array, frozenset[str]]:
    """URL-decode the paths that need it (most need nothing: only those are touched). Also returns the
    decoded paths whose log form delta-rs would not reproduce when it encodes them for a remove action
    (Spark writes non-ASCII characters raw, for example): a remove of such a path would match nothing.
    Whether any path needs a look is one pass over the array's bytes (200,000 paths: 9-12 ms, where a
    regular expression per value took 34 ms); only then is each path matched."""
    arr = raw.combine_chunks() if isinstance(raw, pa.ChunkedArray) else raw
    arr = _as_type(arr, pa.string())
    data = arr.buffers()[2] if len(arr) else None
    # the whole data buffer, a slice's neighbours included: a byte outside the slice can only cause a look
    if data is None or _all_plain(data):
        return arr, frozenset()
    values = arr.to_pylist()
    unremovable = set()
    for i, raw_path in enumerate(values):
        if raw_path is None or not _NEEDS_LOOK.search(raw_path):
            continue
        values[i] = unquote(raw_path)
        if quote(values[i], safe=DELTA_RS_SAFE) != raw_path:
            unremovable.add(values[i])
    return pa.array(values, pa.string()), frozenset(unremovable)


def _plain(column: pa.ChunkedArray | pa.Array) -> pa.Array:
    """One array without dictionary encoding (delta-rs returns some partition columns dictionary-
    encoded, and not always in every chunk)."""
    chunks = column.chunks if isinstance(column, pa.ChunkedArray) else [column]
    if any(pa.types.is_dictionary(c.type) for c in chunks):
        import pyarrow.compute as pc

        chunks = [pc.dictionary_decode(c) if pa.types.is_dictionary(c.type) else c for c in chunks]
    plain = list(chunks)
    if not plain:
        return pa.array([], pa.string())
    types = {c.type for c in plain}
    if len(types) > 1:
        plain = [c.cast(pa.string()) for c in plain]
    return pa.concat_arrays(plain) if len(plain) > 1 else plain[0]


def _float_text(v: float | None) -> str | None:
    """A float as Spark and delta-rs parse it back to the same value ("NaN", not Python's "nan")."""
    if v is None:
        return None
    if math.isnan(v):
        return "NaN"
    if math.isinf(v):
        return "Infinity" if v > 0 else "-Infinity"
    return repr(v)


def spelled_as_logged(paths: pa.Array, column: str, typed: pa.Array, serialized: pa.Array) -> pa.Array:
    """Float partition values as the writer spelled them where the file's folder says it (``x=NaN``,
    ``x=100000000000000000000``): any spelling that parses to the same value is correct, but copying the
    writer's keeps compactor's add actions identical to the writer's."""
    if not pa.types.is_floating(typed.type):
        return serialized
    prefix = f"{column}="
    out = serialized.to_pylist()
    for i, (path, value) in enumerate(zip(paths.to_pylist(), typed.to_pylist())):
        if value is None:
            continue
        for seg in path.split("/")[:-1]:
            if seg.startswith(prefix):
                raw = unquote(seg[len(prefix):])
                try:
                    parsed = float(raw)
                except ValueError:
                    break
                if parsed == value or (math.isnan(parsed) and math.isnan(value)):
                    out[i] = raw
                break
    return pa.array(out, pa.string())


def serialize_partition_values(column: pa.ChunkedArray | pa.Array) -> pa.Array:
    """Typed partition values -> the Delta protocol's string form (module docstring); null stays null."""
    arr = _plain(column)
    t = arr.type
    if pa.types.is_string(t) or pa.types.is_large_string(t):
        return _as_type(arr, pa.string())
    import pyarrow.compute as pc

    if pa.types.is_timestamp(t):
        if t.tz is not None:  # Arrow's %S keeps the fraction of microsecond timestamps
            return pc.strftime(arr.cast(pa.timestamp("us", tz="UTC")), "%Y-%m-%dT%H:%M:%SZ")
        return pc.strftime(arr.cast(pa.timestamp("us")), "%Y-%m-%d %H:%M:%S")
    if pa.types.is_floating(t):
        return pa.array([_float_text(v) for v in arr.to_pylist()], pa.string())
    if pa.types.is_null(t):
        return pa.nulls(len(arr), pa.string())
    return pc.cast(arr, pa.string())


def read_delta_state(where: TableLocation, version: int | None = None, *, table: Any = None) -> TableState:
    """The live files and metadata of the Delta table at ``where``. Raises TableReadError with a clear reason.
    ``table``: an open DeltaTable of it to read instead of loading the log again."""
    uri = where.uri
    configure_delta_rs_allocator()
    register_secrets(where.storage_options)  # error texts below never show an option's value
    from deltalake import DeltaTable

    if table is None and not is_remote(uri):
        p = Path(local_path(uri))
        if not p.exists():
            raise TableReadError(f"{uri}: table path does not exist")
        if not (p / "_delta_log").is_dir():
            raise TableReadError(f"{uri}: not a Delta table (no _delta_log directory)")
    try:
        dt = table if table is not None else \
            DeltaTable(uri, storage_options=dict(where.storage_options or {}) or None, version=version)
        meta = dt.metadata()
        proto = dt.protocol()
        actions = dt.get_add_actions(flatten=True)
        schema_json = dt.schema().to_json()
        v = dt.version()
        names = list(actions.schema.names)
        parts = tuple(meta.partition_columns)

        def col(name: str) -> pa.ChunkedArray:
            return pa.chunked_array(actions.column(name))

        n = len(col("path"))
        paths, unremovable = _logical_paths(col("path"))
        cols = {
            "path": paths,
            "size_bytes": _as_type(col("size_bytes"), pa.int64()),
            "modification_time": _as_type(col("modification_time"), pa.int64()),
            "num_records": (_as_type(col("num_records"), pa.int64()) if "num_records" in names
                            else pa.nulls(n, pa.int64())),
        }
        for c in parts:
            name = f"partition.{c}"
            if name in names:
                typed = _plain(col(name))
                cols[name] = spelled_as_logged(paths, c, typed, serialize_partition_values(typed))
            else:
                cols[name] = pa.nulls(n, pa.string())
        files = pa.table(cols)
    except TableReadError:
        raise
    except Exception as e:  # delta-rs raises several types (DeltaError, OSError, PanicException...)
        raise TableReadError(f"{uri}: {_reason(uri, e)}") from None
    dv_enabled = "deletionVectors" in (proto.reader_features or ())
    deleted = _deleted_rows(dt, uri, files) if dv_enabled else {}
    if deleted:  # None (unknown) adds no column
        counts = [deleted.get(p, 0) for p in files.column("path").to_pylist()]
        files = files.append_column("deleted_rows", pa.array(counts, pa.int64()))
    return TableState(
        uri=uri, format="delta", version=v, partition_columns=parts, files=files, table_id=str(meta.id),
        properties=dict(meta.configuration or {}),
        protocol=Protocol(proto.min_reader_version, proto.min_writer_version,
                          tuple(proto.reader_features or ()), tuple(proto.writer_features or ())),
        schema_json=schema_json,
        # delta-rs' add actions do not expose the deletionVector field; per-file presence would mean
        # materialising every DV, so only the certain answer is given: no feature, no DVs.
        extra=DeltaFacts(has_deletion_vectors=None if deleted is None else bool(deleted),
                         deletion_vectors_enabled=dv_enabled, deleted_rows=deleted,
                         unremovable_paths=frozenset(unremovable)),
    )


def _deleted_rows(dt: Any, uri: str, files: pa.Table) -> dict[str, int] | None:
    """Rows deleted by each file's deletion vector (delta-rs materialises every DV to answer; only tables
    with the deletionVectors feature pay for it). None when delta-rs cannot read them (it cannot resolve
    DVs stored under a random prefix, for example): then any file may have one."""
    try:
        reader = dt.deletion_vectors()
        table = pa.table(reader)  # an Arrow C stream (delta-rs 1.x), whichever reader class holds it
    except Exception as e:  # noqa: BLE001 - delta-rs raises several types
        log.warning("%s: cannot read its deletion vectors (%s); every file is treated as possibly having one", uri,
                    str(e).splitlines()[0][:200])
        return None
    if table.num_rows == 0:
        return {}
    root = uri.rstrip("/")
    known = set(files.column("path").to_pylist())
    out: dict[str, int] = {}
    for location, keep in zip(table.column("filepath").to_pylist(), table.column("selection_vector").to_pylist()):
        rel = unquote(location)
        for prefix in (f"file://{root}/", f"{root}/", "file://"):
            if rel.startswith(prefix):
                rel = rel[len(prefix):]
                break
        if rel not in known:
            rel = next((k for k in known if location.endswith(k) or unquote(location).endswith(k)), rel)
        out[rel] = sum(1 for k in keep if not k)
    return out


def vacuum_candidates(table: TableLocation, retention_hours: int) -> tuple[str, ...] | None:
    """The files a VACUUM with this retention would delete now (a delta-rs dry run in full mode, as
    delta-spark's VACUUM lists: removed files and files the log never named) that are on storage, relative
    to the table root as stored, sorted, each once; None if they cannot be listed."""
    from deltalake import DeltaTable

    try:
        dt = DeltaTable(table.uri, storage_options=dict(table.storage_options or {}) or None)
        return vacuum_listing(dt, table, retention_hours)
    except Exception:  # noqa: BLE001 - files we cannot list are reported as unknown
        return None


def vacuum_listing(dt: Any, table: TableLocation, retention_hours: int) -> tuple[str, ...]:
    """What delta-rs' VACUUM (full, as delta-spark's: removed files and files the log never named, older
    than the retention) would delete now on ``dt``'s snapshot, as ``vacuum_candidates`` gives it."""
    named = dt.vacuum(retention_hours=retention_hours, dry_run=True, enforce_retention_duration=False, full=True)
    return present(stored_files(named, table.uri), table)


def present(files: tuple[str, ...], table: TableLocation) -> tuple[str, ...]:
    """Those of ``files`` (relative to the table) that are on storage. delta-rs' VACUUM names every removed
    file whose tombstone is older than the retention, also one an earlier VACUUM already deleted (the
    tombstone stays in the log until log retention drops it): a plan would list them again at every run and
    never converge."""
    found = stored_objects(files, table)
    return tuple(f for f in files if f in found)


def stored_objects(files: tuple[str, ...], table: TableLocation) -> dict[str, ObjectInfo]:
    """Those of ``files`` (relative to the table) that are files on storage, with their size and
    modification time: one listing of each folder they lie in, or of the whole table where they lie in
    more than ``_FOLDER_LISTINGS`` folders (a full VACUUM lists the whole table itself). Not a folder's
    marker: Hadoop's S3A keeps an empty object ``date=x/`` for a folder it made (Spark's writes), which
    object stores list as a file ``date=x`` beside the folder; delta-rs names it as a file no log holds,
    but its delete (of ``date=x``) never removes it, so every plan would list it again."""
    from compactor.runtime.storage import storage_for

    wanted = set(files)
    store = storage_for(table.uri, table.storage_options)
    folders = sorted({f.rpartition("/")[0] for f in wanted})
    if len(folders) > _FOLDER_LISTINGS:
        objects = store.list("")
        paths = sorted(o.path for o in objects)
        markers = {o.path for o in objects if o.size == 0 and o.path in wanted
                   and (i := bisect.bisect_left(paths, o.path + "/")) < len(paths)
                   and paths[i].startswith(o.path + "/")}  # some object lies under it
    else:
        objects, subfolders = [], set()
        for folder in folders:
            found, dirs = store.list_dir(folder)
            objects += found
            subfolders.update(dirs)
        markers = {o.path for o in objects if o.size == 0 and o.path in subfolders}
    return {o.path: o for o in objects if o.path in wanted and o.path not in markers}


#: folders listed one by one before ``present`` lists the whole table instead (a listing request each)
_FOLDER_LISTINGS = 16


def stored_files(names: list[str], root: str) -> tuple[str, ...]:
    """The files a VACUUM names, relative to the table ``root`` as stored, sorted, each once. delta-rs names
    most relative to the table, but a file the log removed twice (two compactions of one file) once
    relative and once by its store path (local: the absolute path; Azure: the key without the container,
    seen on Azurite); delta-spark names each by its absolute Hadoop path. A name under no form of the root
    stays as it is (a reviewed list, always relative, never holds it). On an object store a file inside
    the table under folders spelling the table's own key would be read as such a twin."""
    return tuple(sorted(stored_names(names, root)))


def stored_names(names: list[str], root: str) -> dict[str, str]:
    """Each file of ``names`` (as ``stored_files`` reads them) relative to the table, to the first name
    the VACUUM gave it."""
    base = local_path(root).rstrip("/")
    if is_remote(root):
        bucket_key = base.split("://", 1)[1]
        forms = [base, bucket_key, bucket_key.partition("/")[2]]
    else:
        forms = [base, "file:" + base, "file://" + base]
    out: dict[str, str] = {}
    for name in names:
        relative = name
        for form in forms:
            if form and name.startswith(form + "/"):
                relative = name[len(form) + 1:]
                break
        out.setdefault(relative, name)
    return out
