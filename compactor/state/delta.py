"""Read a Delta table's state with delta-rs, columnar (one pyarrow Table of live files)."""

from __future__ import annotations

import logging
import os
import re
import sys
from pathlib import Path
from typing import Mapping

import pyarrow as pa

from compactor.errors import TableReadError
from compactor.state.model import Protocol, TableState

log = logging.getLogger(__name__)

_URI = re.compile(r"^[a-zA-Z][a-zA-Z0-9+.-]*://")


def is_uri(path: str) -> bool:
    return bool(_URI.match(path))


def _reason(uri: str, e: Exception) -> str:
    text = str(e)
    if "No table metadata" in text:
        return "corrupt log: no table metadata (metaData action) found"
    if "not a Delta table" in text.lower() or "no files in log segment" in text.lower() or "notATable" in text:
        return "not a Delta table (no readable _delta_log)"
    if "contiguous" in text:
        return "corrupt log: commit versions are not contiguous"
    if "catalog" in text.lower():
        return "unsupported: catalog-managed table (must be read through its catalog)"
    if "protocol" in text.lower() or "Unsupported" in text or "feature" in text.lower():
        return f"unsupported protocol: {text.splitlines()[0][:300]}"
    return text.splitlines()[0][:300] if text else type(e).__name__


#: delta-rs links its own jemalloc, which by default keeps freed pages for ~10 s. Python's allocator
#: cannot reuse them, so a plan's peak memory was delta-rs' transient log replay *plus* the planner's.
#: Returning freed pages at once cut the peak at 1M files from 1.2 GiB to 0.77 GiB (bench/plan_scale.py).
JEMALLOC_CONF = "dirty_decay_ms:0,muzzy_decay_ms:0"


def configure_delta_rs_allocator() -> bool:
    """Ask delta-rs' jemalloc to return freed memory at once. jemalloc reads its configuration once,
    when deltalake is first loaded, so this only works before that; a user's own setting wins.
    Returns whether the setting will take effect."""
    if "deltalake" in sys.modules:
        return False
    os.environ.setdefault("_RJEM_MALLOC_CONF", JEMALLOC_CONF)
    return True


def read_delta_state(uri: str, storage_options: Mapping[str, str] | None = None,
                     version: int | None = None) -> TableState:
    """The live files and metadata of a Delta table. Raises TableReadError with a clear reason."""
    configure_delta_rs_allocator()
    from deltalake import DeltaTable

    if not is_uri(uri):
        p = Path(uri)
        if not p.exists():
            raise TableReadError(f"{uri}: table path does not exist")
        if not (p / "_delta_log").is_dir():
            raise TableReadError(f"{uri}: not a Delta table (no _delta_log directory)")
    try:
        dt = DeltaTable(uri, storage_options=dict(storage_options or {}) or None, version=version)
        meta = dt.metadata()
        proto = dt.protocol()
        actions = pa.table(dt.get_add_actions(flatten=True))
        schema_json = dt.schema().to_json()
        v = dt.version()
    except TableReadError:
        raise
    except Exception as e:  # delta-rs raises several types (DeltaError, OSError, PanicException...)
        raise TableReadError(f"{uri}: {_reason(uri, e)}") from None
    parts = tuple(meta.partition_columns)
    cols = {
        "path": actions.column("path"),
        "size_bytes": actions.column("size_bytes").cast(pa.int64()),
        "modification_time": actions.column("modification_time").cast(pa.int64()),
        "num_records": (actions.column("num_records").cast(pa.int64()) if "num_records" in actions.column_names
                        else pa.nulls(actions.num_rows, pa.int64())),
    }
    for c in parts:
        name = f"partition.{c}"
        cols[name] = (actions.column(name).cast(pa.string()) if name in actions.column_names
                      else pa.nulls(actions.num_rows, pa.string()))
    files = pa.table(cols)
    dv_enabled = "deletionVectors" in (proto.reader_features or ())
    return TableState(
        uri=uri, format="delta", version=v, partition_columns=parts, files=files,
        properties=dict(meta.configuration or {}),
        protocol=Protocol(proto.min_reader_version, proto.min_writer_version,
                          tuple(proto.reader_features or ()), tuple(proto.writer_features or ())),
        schema_json=schema_json,
        # delta-rs' add actions do not expose the deletionVector field; per-file presence would mean
        # materialising every DV, so only the certain answer is given: no feature, no DVs.
        extra={"has_deletion_vectors": False if not dv_enabled else None,
               "deletion_vectors_enabled": dv_enabled},
    )
