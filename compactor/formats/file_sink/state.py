"""A file-sink output's state as a TableState: the visible manifest entries, columnar."""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Mapping
from urllib.parse import unquote

import pyarrow as pa
import pyarrow.compute  # noqa: F401  (pa.compute)

from compactor.errors import TableReadError
from compactor.formats.file_sink.log import entry_local_path, list_log, sink_entries_table
from compactor.models.state import TableState

METADATA_DIR = "_spark_metadata"
#: replaced data files waiting out the grace period before they are deleted
LEDGER = "_compactor/sink_ledger.json"


def _partition_values(local: Path, root: Path) -> dict[str, str | None]:
    try:
        rel = local.parent.relative_to(root)
    except ValueError:
        return {}
    out: dict[str, str | None] = {}
    for part in rel.parts:
        if "=" in part:
            k, v = part.split("=", 1)
            v = unquote(v)
            out[unquote(k)] = None if v == "__HIVE_DEFAULT_PARTITION__" else v
    return out


def read_ledger(root: Path) -> list[dict]:
    """Entries ``{"file": local path, "replaced_at": epoch s}``; a missing or torn ledger is empty."""
    try:
        entries = json.loads((root / LEDGER).read_text())
    except (OSError, ValueError):
        return []
    return [e for e in entries if isinstance(e, dict) and "file" in e] if isinstance(entries, list) else []


def read_sink_state(path: str, storage_options: Mapping[str, str] | None = None, *,
                    checkpoint: str | None = None) -> TableState:
    """The sink's visible files, plus what planning needs: log and (given) checkpoint activity, and the
    ledger of replaced files."""
    root = Path(path)
    if "://" in path and not path.startswith("file:"):
        raise TableReadError(f"{path}: only local file-sink outputs are supported by this version")
    if not root.is_dir():
        raise TableReadError(f"{path}: sink output directory does not exist")
    if not (root / METADATA_DIR).is_dir():
        raise TableReadError(f"{path}: not a Structured Streaming file-sink output (no {METADATA_DIR})")
    log = list_log(root / METADATA_DIR)
    if log.latest_batch is None:
        raise TableReadError(f"{path}: the sink log has no batches yet")
    entries = sink_entries_table(log)
    raw = entries.column("raw_path").to_pylist()
    # partition values depend only on the parent directory: resolve each distinct one once (millions of
    # entries share a few thousand directories)
    by_parent: dict[str, dict[str, str | None]] = {}
    parts = []
    for r in raw:
        parent = r.rsplit("/", 1)[0]
        pv = by_parent.get(parent)
        if pv is None:
            pv = by_parent[parent] = _partition_values(entry_local_path(r, root), root)
        parts.append(pv)
    order: dict[str, int] = {}
    for pv in by_parent.values():
        for i, k in enumerate(pv):
            order.setdefault(k, i)
    cols = sorted(order, key=lambda k: order[k])
    files = pa.table({
        "path": entries.column("raw_path"),
        "size_bytes": entries.column("size_bytes"),
        "modification_time": entries.column("modification_time"),
        "num_records": pa.nulls(entries.num_rows, pa.int64()),
        **{f"partition.{c}": pa.array([pv.get(c) for pv in parts], pa.string()) for c in cols},
        "in_compact": entries.column("in_compact"),
    })
    lc = log.latest_compact
    return TableState(
        uri=str(root), format="spark_file_sink", version=log.latest_batch, partition_columns=tuple(cols), files=files,
        extra={"latest_batch": log.latest_batch, "compact_interval": log.compact_interval(),
               "latest_compact": lc.path.name if lc else None, "compact_file_bytes": lc.size if lc else 0,
               "compact_entries": int(sum(entries.column("in_compact").to_pylist())),
               "newest_log_mtime_ms": log.newest_mtime_ms, "log_files": len(log.files),
               "checkpoint_newest_mtime_ms": checkpoint_newest_mtime_ms(checkpoint) if checkpoint else None,
               "ledger": read_ledger(root),
               # Spark >= 3.1 ignores the action: a "delete" entry is read as one more listed file
               "delete_entries": int(pa.compute.sum(pa.compute.equal(entries.column("action"), "delete")).as_py() or 0)},
    )


def checkpoint_newest_mtime_ms(checkpoint: str) -> int | None:
    """Newest write under a streaming checkpoint's commits/ and offsets/ (None if absent)."""
    newest = None
    for sub in ("commits", "offsets"):
        d = Path(checkpoint) / sub
        if d.is_dir():
            for e in os.scandir(d):
                if e.is_file() and not e.name.startswith("."):
                    m = int(e.stat().st_mtime * 1000)
                    newest = m if newest is None else max(newest, m)
    return newest
