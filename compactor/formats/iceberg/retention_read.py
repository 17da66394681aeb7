"""What a policy's Iceberg retention is planned from (retention_facts.RetentionFacts), read without a JVM when
the policy enables it: every snapshot in the table's metadata (id, parent, time, the manifests its manifest
list names), the branches and tags, and per manifest the data and delete files its entries name whatever
their status (each manifest read once, as the deletion gate reads them: references.py); with
``remove_orphan_files`` also one listing of the table's location (compactor's Storage: local disk and object
stores alike), of which the files no snapshot references are kept, with their size and time.

Never listed as an orphan: the table's metadata folder (its ``metadata/``, or ``write.metadata.path`` when
that lies inside the location) and any ``*.metadata.json`` or ``version-hint.text``; a name on the path that
is hidden (``.x``; ``_x`` unless it is a partition folder ``_x=v``), which covers compactor's own
``_compactor`` state and staging folders; an object store's folder marker; and what a compactor run that may
still be running names in its journal (runtime/journal.py ``live_entries``). A location that also holds
another format's metadata (its log folder) is not judged at all: the plan says so."""

from __future__ import annotations

import bisect
from collections.abc import Iterable, Mapping
from concurrent.futures import ThreadPoolExecutor
from dataclasses import replace
from typing import TYPE_CHECKING

from compactor.formats.iceberg.live import MANIFEST_READERS
from compactor.formats.iceberg.read import iceberg_state, table_root
from compactor.formats.iceberg.retention_facts import ListedFile, RefFact, RetentionFacts, SnapshotFact
from compactor.models.formats import format_spec, metadata_names
from compactor.models.state import TableState
from compactor.models.table import TableLocation
from compactor.policy.model import Retention
from compactor.runtime import journal
from compactor.runtime.storage import ObjectInfo, Storage, locate, storage_for

if TYPE_CHECKING:
    from pyiceberg.table import Table

#: files of the table's metadata wherever they lie (a Hadoop catalog's version hint beside them)
METADATA_SUFFIXES = (".metadata.json", ".metadata.json.gz", "version-hint.text")


def wanted(retention: Retention | None) -> bool:
    """Whether ``retention`` plans anything of an Iceberg table (its facts are worth reading)."""
    return retention is not None and (retention.expire_snapshots.enabled or retention.remove_orphan_files.enabled)


def snapshot_facts(table: Table) -> tuple[tuple[SnapshotFact, ...], dict[str, tuple[tuple[str, int], ...]]]:
    """Every snapshot in ``table``'s metadata with the manifests it names, and what each manifest names."""
    md, io = table.metadata, table.io
    lists = {s.snapshot_id: s.manifests(io) for s in md.snapshots}
    snapshots = tuple(SnapshotFact(s.snapshot_id, s.parent_snapshot_id, int(s.timestamp_ms),
                                   tuple(m.manifest_path for m in lists[s.snapshot_id])) for s in md.snapshots)
    names: list[str] = list(dict.fromkeys(p for s in snapshots for p in s.manifests))
    by_path = {m.manifest_path: m for ms in lists.values() for m in ms}

    def read(path: str) -> tuple[str, tuple[tuple[str, int], ...]]:
        entries = by_path[path].fetch_manifest_entry(io, discard_deleted=False)
        return path, tuple((str(e.data_file.file_path), int(e.data_file.file_size_in_bytes)) for e in entries)

    if len(names) <= 1:
        return snapshots, dict(map(read, names))
    with ThreadPoolExecutor(max_workers=MANIFEST_READERS, thread_name_prefix="manifests") as pool:
        return snapshots, dict(pool.map(read, names))


def retention_facts(table: Table, location: TableLocation, retention: Retention) -> RetentionFacts:
    """The facts ``retention`` is planned from (module docstring). A failure to read them is the facts'
    ``problem`` (the plan skips the table's retention naming it), never an exception."""
    md = table.metadata
    try:
        snapshots, manifests = snapshot_facts(table)
    except Exception as e:  # noqa: BLE001 - pyiceberg's FileIO and Avro reader raise many kinds
        return RetentionFacts(None, (), (), {}, problem=f"cannot read the table's manifests: {_cause(e)}")
    current = md.current_snapshot()
    refs = tuple(sorted(RefFact(name, ref.snapshot_id, ref.snapshot_ref_type.value) for name, ref in md.refs.items()))
    facts = RetentionFacts(current.snapshot_id if current is not None else None, snapshots, refs, manifests,
                           format_version=int(md.format_version))
    if not retention.remove_orphan_files.enabled:
        return facts
    try:
        listed, problem = unreferenced_files(table, location, _referenced(table, snapshots, manifests))
    except Exception as e:  # noqa: BLE001 - a listing that fails plans no orphan removal, saying why
        listed, problem = None, f"cannot list the table's location: {_cause(e)}"
    return replace(facts, unreferenced=listed, listing_problem=problem)


def _cause(e: BaseException) -> str:
    first = (str(e).strip().splitlines() or [""])[0]
    return f"{type(e).__name__}: {first}" if first else type(e).__name__


def _referenced(table: Table, snapshots: Iterable[SnapshotFact],
                manifests: Mapping[str, tuple[tuple[str, int], ...]]) -> set[str]:
    """Every path the table's metadata names (as references.referenced_paths, and partition statistics)."""
    md = table.metadata
    out: set[str] = {table.metadata_location, *(e.metadata_file for e in md.metadata_log)}
    out.update(s.statistics_path for s in md.statistics)
    out.update(s.statistics_path for s in md.partition_statistics)
    out.update(s.manifest_list for s in md.snapshots)
    for s in snapshots:
        out.update(s.manifests)
    out.update(path for entries in manifests.values() for path, _ in entries)
    return out


def hidden_name(part: str) -> bool:
    """A hidden name (``.x``, ``_x``) that is no partition folder (``_x=v``)."""
    return part.startswith(".") or (part.startswith("_") and "=" not in part)


def _markers(objects: list[ObjectInfo]) -> set[str]:
    """Objects that are a folder's marker (S3A's empty ``date=x`` beside the folder ``date=x/``)."""
    paths = sorted(o.path for o in objects)
    out = set()
    for o in objects:
        if o.path.endswith("/"):
            out.add(o.path)
        elif not o.size:
            i = bisect.bisect_left(paths, o.path + "/")
            if i < len(paths) and paths[i].startswith(o.path + "/"):
                out.add(o.path)
    return out


def live_journal(root: str, options: Mapping[str, str]) -> tuple[set[str], tuple[str, ...]]:
    """What runs that may still be running name: exact files, and folders (relative to the table root)."""
    files: set[str] = set()
    folders: list[str] = []
    for entry in journal.live_entries(root, options):
        files.update(entry.outputs)
        folders += [*entry.staging, *entry.folders]
    return files, tuple(f.strip("/") for f in folders)


def unreferenced_files(table: Table, location: TableLocation,
                       referenced: set[str]) -> tuple[tuple[ListedFile, ...] | None, str | None]:
    """The files under the table's location that no path in ``referenced`` names (module docstring), sorted,
    or None with the reason the location is not judged."""
    options = location.storage_options
    root = table_root(table)
    storage = storage_for(root, options)
    foreign = foreign_metadata(storage)
    if foreign:
        return None, foreign
    objects = storage.list("")
    refs = {locate(p, options)[1] for p in referenced}
    meta = metadata_folder(table, root, options)
    named, folders = live_journal(root, options)
    markers = _markers(objects)
    out = []
    for o in objects:
        rel = o.path
        parts = rel.split("/")
        if rel in markers or rel in named or any(hidden_name(p) for p in parts) or rel.endswith(METADATA_SUFFIXES):
            continue
        if (meta and (rel == meta or rel.startswith(meta + "/"))) or any(
                not f or rel == f or rel.startswith(f + "/") for f in folders):
            continue
        path = storage.full_uri(rel)
        if locate(path, options)[1] in refs:
            continue
        out.append(ListedFile(path, int(o.size), int(o.mtime * 1000)))
    return tuple(sorted(out)), None


def foreign_metadata(storage: Storage) -> str | None:
    """Why the location is not judged by the Iceberg metadata alone: it also holds another registered
    format's metadata (its log folder) at the top; None when it does not (one listing of the top folder)."""
    spec = format_spec("iceberg")
    own = {*(spec.metadata if spec is not None else ()), "_compactor"}
    files, folders = storage.list_dir("")
    top = {p.rstrip("/").rsplit("/", 1)[-1] for p in (*folders, *(o.path for o in files))}
    foreign = sorted(top & (set(metadata_names()) - own))
    if foreign:
        return f"the location also holds {foreign[0]}, another format's metadata: its files are not the Iceberg metadata's to judge"
    return None


def metadata_folder(table: Table, root: str, options: Mapping[str, str]) -> str | None:
    """The table's metadata folder relative to ``root`` (``metadata``, or ``write.metadata.path`` when it lies
    inside the location); None when it lies elsewhere."""
    custom = table.metadata.properties.get("write.metadata.path")
    if not custom:
        return "metadata"
    name, base = locate(custom, options)[1].rstrip("/"), locate(root, options)[1].rstrip("/")
    return name[len(base) + 1:] if name.startswith(base + "/") else None


def with_retention_facts(state: TableState, table: Table, location: TableLocation,
                         retention: Retention | None) -> TableState:
    """``state`` with the facts ``retention`` is planned from (unchanged when it plans nothing)."""
    if not wanted(retention):
        return state
    assert retention is not None
    st = iceberg_state(state)
    return replace(state, extra=replace(st, retention=retention_facts(table, location, retention)))
