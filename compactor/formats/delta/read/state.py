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
from compactor.formats.delta.plan.support import compactor_commits
from compactor.formats.delta.read.deletion_vector_ids import logged_deletion_vectors
from compactor.formats.delta.read.facts import DeltaFacts, DeltaProtocol
from compactor.formats.delta.read.log_paths import DELTA_RS_SAFE
from compactor.models.state import TableState
from compactor.models.table import TableLocation
from compactor.runtime.paths import is_remote, local_path
from compactor.runtime.secrets import error_text, redact, register_secrets

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
    protocol = DeltaProtocol(proto.min_reader_version, proto.min_writer_version, tuple(proto.reader_features or ()),
                             tuple(proto.writer_features or ()))
    logged = logged_deletion_vectors(where, v) if dv_enabled and version is None else None
    if logged is not None and set(logged) <= set(files.column("path").to_pylist()):
        deleted: dict[str, int] | None = {p: d.cardinality for p, d in logged.items()}
    else:  # the log could not be replayed with certainty: delta-rs materialises every DV
        logged = None
        deleted = _deleted_rows(dt, where, files, log_tried=version is None) if dv_enabled else {}
    if deleted:  # None (unknown) adds no column
        counts = [deleted.get(p, 0) for p in files.column("path").to_pylist()]
        files = files.append_column("deleted_rows", pa.array(counts, pa.int64()))
    return TableState(
        uri=uri, format="delta", version=v, partition_columns=parts, files=files, table_id=str(meta.id),
        properties=dict(meta.configuration or {}),
        # delta-rs' add actions do not expose the deletionVector field; per-file presence would mean
        # materialising every DV, so only the certain answer is given: no feature, no DVs.
        extra=DeltaFacts(protocol=protocol, compactor_commits=compactor_commits(protocol, where.storage_options),
                         schema_json=schema_json, has_deletion_vectors=None if deleted is None else bool(deleted),
                         deletion_vectors_enabled=dv_enabled, deleted_rows=deleted, deletion_vectors=logged,
                         unremovable_paths=frozenset(unremovable)),
    )


def _deleted_rows(dt: Any, where: TableLocation, files: pa.Table, *, log_tried: bool) -> dict[str, int] | None:
    """Rows deleted by each file's deletion vector (delta-rs materialises every DV to answer; only tables
    with the deletionVectors feature pay for it). None when delta-rs cannot read them (it cannot resolve
    DVs stored under a random prefix, for example) nor the log: then any file may have one. ``log_tried``:
    the log's cardinalities were asked first and could not answer (not asked again)."""
    uri = where.uri
    try:
        reader = dt.deletion_vectors()
        table = pa.table(reader)  # an Arrow C stream (delta-rs 1.x), whichever reader class holds it
    except Exception as e:  # noqa: BLE001 - delta-rs raises several types
        logged = None if log_tried else _logged_cardinalities(where, dt, files)
        if logged is None:
            log.warning("%s: cannot read its deletion vectors (%s); every file is treated as possibly having one",
                        uri, str(e).splitlines()[0][:200])
        return logged
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


def _logged_cardinalities(where: TableLocation, dt: Any, files: pa.Table) -> dict[str, int] | None:
    """Rows deleted by each file's deletion vector as the log's descriptors count them (``cardinality``,
    read/deletion_vector_ids.py), where delta-rs cannot read the vectors themselves (it cannot resolve some
    that delta-spark writes); None when the log's replay is not at delta-rs' version, cannot be read, or
    names a file delta-rs does not list. A rewrite decodes and proves each vector before dropping rows by it
    (formats/delta/apply/deletes.py)."""
    vectors = logged_deletion_vectors(where, dt.version())
    if vectors is None or not set(vectors) <= set(files.column("path").to_pylist()):
        return None
    return {p: d.cardinality for p, d in vectors.items()}
