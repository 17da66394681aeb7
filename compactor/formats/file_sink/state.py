"""A file-sink output's state as a TableState: the visible manifest entries, columnar."""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any
from urllib.parse import unquote

import pyarrow as pa
import pyarrow.compute  # noqa: F401  (pa.compute)

from compactor.errors import TableReadError
from compactor.formats.file_sink.location import SinkRoot
from compactor.formats.file_sink.log import MetadataLog, list_log, sink_entries_table
from compactor.models.state import TableState
from compactor.runtime.paths import is_remote
from compactor.runtime.storage import ObjectNotFoundError, storage_for

METADATA_DIR = "_spark_metadata"
#: replaced data files waiting out the grace period before they are deleted
LEDGER = "_compactor/sink_ledger.json"
#: object stores: the mtime each .compact had before compactor replaced it (a PUT cannot keep it)
SWAPS = "_compactor/sink_swaps.json"


@dataclass(frozen=True)
class LedgerEntry:
    """A replaced data file waiting out the grace period (``_compactor/sink_ledger.json``)."""

    file: str
    #: epoch seconds; None: not recorded (never due)
    replaced_at: float | None


@dataclass(frozen=True)
class SinkFacts:
    """What a file-sink output's state carries beside its files (TableState.extra of "spark_file_sink")."""

    latest_batch: int | None = None
    compact_interval: int | None = None
    #: name of the newest .compact manifest (None: none yet)
    latest_compact: str | None = None
    compact_file_bytes: int = 0
    #: entries of the latest .compact
    compact_entries: int = 0
    newest_log_mtime_ms: int | None = None
    log_files: int = 0
    checkpoint_newest_mtime_ms: int | None = None
    ledger: tuple[LedgerEntry, ...] = ()
    #: "delete" entries in the manifest (Spark >= 3.1 ignores the action: read as one more listed file)
    delete_entries: int = 0


def sink_facts(state: TableState) -> SinkFacts:
    return state.extra if isinstance(state.extra, SinkFacts) else SinkFacts()


def _partition_values(rel: str | None) -> dict[str, str | None]:
    if rel is None:
        return {}
    out: dict[str, str | None] = {}
    for part in rel.split("/")[:-1]:
        if "=" in part:
            k, v = part.split("=", 1)
            v = unquote(v)
            out[unquote(k)] = None if v == "__HIVE_DEFAULT_PARTITION__" else v
    return out


def _read_json(sink: SinkRoot, rel: str) -> Any:
    try:
        return json.loads(sink.storage.read_bytes(rel))
    except (ObjectNotFoundError, ValueError):
        return None


def read_ledger(root: Path | str | SinkRoot, storage_options: Mapping[str, str] | None = None) -> list[dict[str, Any]]:
    """Entries ``{"file": location, "replaced_at": epoch s}`` (location: an absolute local path, or the
    file's URI on object stores); a missing or torn ledger is empty."""
    sink = root if isinstance(root, SinkRoot) else SinkRoot(str(root), storage_options)
    entries = _read_json(sink, LEDGER)
    return [e for e in entries if isinstance(e, dict) and "file" in e] if isinstance(entries, list) else []


def read_swaps(sink: SinkRoot) -> dict[str, dict[str, Any]]:
    """``{.compact name: {"e_tag": version compactor wrote, "mtime_ms": the writer's mtime}}``."""
    swaps = _read_json(sink, SWAPS)
    return swaps if isinstance(swaps, dict) else {}


def _same_etag(a: str | None, b: str | None) -> bool:
    """ETags as a PUT answer and as a listing shows them may differ in quoting (Azure)."""
    def norm(e: str) -> str:
        return e.removeprefix("W/").strip('"')

    return a is not None and b is not None and norm(a) == norm(b)


def sink_log(sink: SinkRoot) -> MetadataLog:
    """The sink's metadata log, with the writer's mtimes restored for the .compact files compactor
    replaced on an object store (the writer guard reads log mtimes as writer activity: compactor's own
    PUT must not look like a running query)."""
    log = list_log(sink.location(METADATA_DIR), sink.storage_options)
    if sink.remote:
        swaps = read_swaps(sink)
        if swaps:
            log.files = [replace(lf, mtime_ms=int(swaps[lf.name]["mtime_ms"]))
                         if lf.e_tag and _same_etag(swaps.get(lf.name, {}).get("e_tag"), lf.e_tag) else lf
                         for lf in log.files]
    return log


def read_sink_state(path: str, storage_options: Mapping[str, str] | None = None, *,
                    checkpoint: str | None = None) -> TableState:
    """The sink's visible files, plus what planning needs: log and (given) checkpoint activity, and the
    ledger of replaced files."""
    sink = SinkRoot(path, storage_options)
    if not sink.remote and not Path(sink.uri).is_dir():
        raise TableReadError(f"{path}: sink output directory does not exist")
    if not sink.storage.is_dir(METADATA_DIR):
        raise TableReadError(f"{path}: not a Structured Streaming file-sink output (no {METADATA_DIR})")
    log = sink_log(sink)
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
            pv = by_parent[parent] = _partition_values(sink.rel(r))
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
        uri=sink.uri, format="spark_file_sink", version=log.latest_batch, partition_columns=tuple(cols), files=files,
        extra=SinkFacts(
            latest_batch=log.latest_batch, compact_interval=log.compact_interval(),
            latest_compact=lc.name if lc else None, compact_file_bytes=lc.size if lc else 0,
            compact_entries=int(sum(entries.column("in_compact").to_pylist())),
            newest_log_mtime_ms=log.newest_mtime_ms, log_files=len(log.files),
            checkpoint_newest_mtime_ms=checkpoint_newest_mtime_ms(checkpoint, storage_options) if checkpoint else None,
            ledger=tuple(LedgerEntry(str(e["file"]), e.get("replaced_at")) for e in read_ledger(sink)),
            delete_entries=int(pa.compute.sum(pa.compute.equal(entries.column("action"), "delete")).as_py() or 0)),
    )


def checkpoint_newest_mtime_ms(checkpoint: str, storage_options: Mapping[str, str] | None = None) -> int | None:
    """Newest write under a streaming checkpoint's commits/ and offsets/ (None if absent); the checkpoint
    may be on an object store (one listing per folder)."""
    storage = storage_for(checkpoint, storage_options if is_remote(checkpoint) else None)
    newest = None
    for sub in ("commits", "offsets"):
        for o in storage.list_dir(sub)[0]:
            if not o.path.rsplit("/", 1)[-1].startswith("."):
                m = int(o.mtime * 1000)
                newest = m if newest is None else max(newest, m)
    return newest
