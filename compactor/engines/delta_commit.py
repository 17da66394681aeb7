"""Commit files written by another engine (Spark) into a Delta table through delta-rs, safely.

Before writing, a journal under ``<table>/_compactor/rewrites/`` names every file the rewrite will
create, so a run killed between writing and committing leaves nothing behind that the next run cannot
prove it wrote. Right before committing, the files to remove are re-checked (still live); after
committing, overlapping removes by concurrent commits are found and repaired (delta_guard).
"""

from __future__ import annotations

import json
import logging
import time
import uuid
from dataclasses import dataclass
from typing import Any, Mapping, Sequence

import pyarrow.fs as pafs

from compactor.engines import delta_guard

log = logging.getLogger(__name__)

#: separate from the runner's action journal (compactor/apply/journal.py), which has its own format
JOURNAL_DIR = "_compactor/rewrites"


def table_fs(uri: str) -> tuple[pafs.FileSystem, str]:
    if "://" in uri and not uri.startswith("file://"):
        fs, base = pafs.FileSystem.from_uri(uri)
        return fs, base.rstrip("/")
    return pafs.LocalFileSystem(), uri.removeprefix("file://").rstrip("/")


@dataclass(frozen=True)
class NewFile:
    path: str  # relative to the table root
    size: int
    partition_values: Mapping[str, str | None]
    stats: str
    num_records: int


def write_journal(uri: str, name: str, entries: Mapping[str, Any]) -> str:
    fs, base = table_fs(uri)
    fs.create_dir(f"{base}/{JOURNAL_DIR}", recursive=True)
    path = f"{base}/{JOURNAL_DIR}/{name}.json"
    with fs.open_output_stream(path) as f:
        f.write(json.dumps({"written_at": time.time(), **entries}).encode())
    return path


def clear_journal(uri: str, name: str) -> None:
    fs, base = table_fs(uri)
    try:
        fs.delete_file(f"{base}/{JOURNAL_DIR}/{name}.json")
    except FileNotFoundError:
        pass


def pending_journals(uri: str) -> list[str]:
    """Names of rewrite journals left by runs that neither committed nor cleaned up (killed runs)."""
    fs, base = table_fs(uri)
    sel = pafs.FileSelector(f"{base}/{JOURNAL_DIR}", allow_not_found=True)
    return sorted(i.base_name.removesuffix(".json") for i in fs.get_file_info(sel) if i.path.endswith(".json"))


def delete_quietly(fs: pafs.FileSystem, path: str) -> None:
    try:
        info = fs.get_file_info(path)
        if info.type == pafs.FileType.Directory:
            fs.delete_dir(path)
        elif info.type == pafs.FileType.File:
            fs.delete_file(path)
    except OSError:
        log.warning("could not delete %s", path)


def clean_journals(uri: str, storage_options: Mapping[str, str] | None, live: set[str]) -> int:
    """Remove what dead runs wrote but never committed. Call only while holding the table lease (no
    other compactor can be mid-rewrite on this table); files the log references are kept."""
    fs, base = table_fs(uri)
    sel = pafs.FileSelector(f"{base}/{JOURNAL_DIR}", allow_not_found=True)
    removed = 0
    for info in fs.get_file_info(sel):
        if not info.path.endswith(".json"):
            continue
        try:
            with fs.open_input_stream(info.path) as f:
                entry = json.loads(f.read().decode())
        except (OSError, ValueError):
            entry = {}
        for rel in entry.get("files", []):
            if rel not in live:
                delete_quietly(fs, f"{base}/{rel}")
                removed += 1
        for rel in entry.get("staging", []):
            delete_quietly(fs, f"{base}/{rel}")
        delete_quietly(fs, info.path)
    if removed:
        log.warning("%s: removed %d uncommitted file(s) left by an interrupted run", uri, removed)
    return removed


def new_file_name(partition_dir: str) -> str:
    name = f"part-{uuid.uuid4()}-compactor.c000.snappy.parquet"
    return f"{partition_dir}/{name}" if partition_dir else name


def commit_rewrite(uri: str, storage_options: Mapping[str, str] | None, *, removed: Sequence[Mapping[str, Any]],
                   added: Sequence[NewFile], partition_columns: Sequence[str],
                   commit_metadata: Mapping[str, str]) -> None:
    """One dataChange=false commit: add the new files, remove the replaced ones (re-checked live)."""
    from deltalake import DeltaTable
    from deltalake.transaction import AddAction, CommitProperties, RemoveAction

    delta_guard.assert_files_live(uri, storage_options, [r["path"] for r in removed])
    dt = DeltaTable(uri, storage_options=dict(storage_options or {}) or None)
    now = int(time.time() * 1000)
    actions: list[Any] = [AddAction(f.path, f.size, dict(f.partition_values), now, False, f.stats) for f in added]
    actions += [RemoveAction(r["path"], False, now, int(r["size_bytes"]), dict(r["partition_values"]))
                for r in removed]
    dt.create_write_transaction(actions, mode="append", schema=dt.schema(), partition_by=list(partition_columns),
                                commit_properties=CommitProperties(custom_metadata=dict(commit_metadata)))
