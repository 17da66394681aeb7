"""compactor's own replay of a Delta log: which files the table references, read from the log itself.

Every deletion compactor makes is proved against this replay (formats/delta/read/references.py), never against
a list another library computed: delta-rs' VACUUM dry run names a live file's deletion vector as an orphan,
for example (issue 36). The replay reads the newest complete checkpoint (classic, multi-part, or v2 with its
sidecars, in JSON or Parquet) and the JSON commits after it, and reconciles them as the protocol does: a
file action is keyed by its path and its deletion vector's unique id; an add makes its key live and drops
its tombstone, a remove makes it a tombstone (with its ``deletionTimestamp``) and drops it from the live set.

A file action names up to two files, its data file and its deletion vector's (formats/delta/read/log_paths.py
says where each points). Paths are kept decoded and relative to the table root, as storage lists them; one
outside the root stays absolute (nothing under the root is it).

Anything the replay cannot read with certainty (a gap in the commits, a checkpoint part gone, a deletion
vector it cannot resolve, a catalog-managed table whose newest commits live elsewhere) raises
``TableReadError``: a caller about to delete files then deletes nothing."""

from __future__ import annotations

import json
import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, NamedTuple
from urllib.parse import unquote

from compactor.errors import TableReadError
from compactor.formats.delta.read.deletion_vectors import DescriptorJson, descriptor
from compactor.formats.delta.read.log import Commit, read_commit
from compactor.formats.delta.read.log_paths import DeletionVectorFile, dv_file, relative_to_root, spelled_otherwise
from compactor.models.table import TableLocation
from compactor.runtime.storage import Storage, StorageError, storage_for

LOG_DIR = "_delta_log"
_COMMIT = re.compile(r"^(\d{20})\.json$")
_CLASSIC = re.compile(r"^(\d{20})\.checkpoint\.parquet$")
_MULTI = re.compile(r"^(\d{20})\.checkpoint\.(\d{10})\.(\d{10})\.parquet$")
_V2 = re.compile(r"^(\d{20})\.checkpoint\.[0-9a-fA-F-]{36}\.(json|parquet)$")
#: writer features whose newest commits may live outside ``_delta_log`` (a catalog holds them)
_UNLISTED_COMMITS = frozenset({"catalogManaged", "catalogOwned-preview", "coordinatedCommits-preview"})
#: table features whose files the replay knows (the protocol's features as of Delta 4.4): a table with any
#: other may reference files in a way the replay cannot see, so nothing of it is deleted
KNOWN_FEATURES = frozenset({
    "appendOnly", "invariants", "checkConstraints", "changeDataFeed", "generatedColumns", "columnMapping",
    "identityColumns", "deletionVectors", "rowTracking", "timestampNtz", "domainMetadata", "v2Checkpoint",
    "liquid", "clustering", "icebergCompatV1", "icebergCompatV2", "icebergCompatV3", "icebergWriterCompatV1",
    "icebergWriterCompatV3", "inCommitTimestamp", "vacuumProtocolCheck", "typeWidening", "typeWidening-preview",
    "variantType", "variantType-preview", "variantShredding-preview", "allowColumnDefaults", "collations-preview",
    "checkpointProtection", "materializePartitionColumns", *_UNLISTED_COMMITS,
})


class FileRef(NamedTuple):
    """A file action as the replay keeps it: its data file, its deletion vector's file, and for a
    tombstone when it was removed (ms since the epoch; 0 when the writer gave no ``deletionTimestamp``)."""

    path: str
    dv: DeletionVectorFile | None = None
    deleted_at: int | None = None


def dv_key(dv: Mapping[str, Any] | None) -> str:
    """A deletion vector's unique id as the protocol defines it (storage type, then the path or inline
    data, then ``@offset`` when there is one); "" for a file without one."""
    if not dv:
        return ""
    offset = dv.get("offset")
    return f"{dv.get('storageType')}{dv.get('pathOrInlineDv')}" + (f"@{offset}" if offset is not None else "")


def _is_absolute(path: str) -> bool:
    return path.startswith(("/", "file:")) or "://" in path


def _decoded(action: Mapping[str, Any]) -> str:
    """An action's ``path`` field decoded (the log stores paths URL-encoded)."""
    path = str(action["path"])
    return unquote(path) if "%" in path else path


@dataclass
class Replay:
    """The table's file references at ``version`` (module docstring)."""

    root: str
    version: int = -1
    live: dict[tuple[str, str], FileRef] = field(default_factory=dict)
    tombstones: dict[tuple[str, str], FileRef] = field(default_factory=dict)
    #: the change data files of each commit read, by version (commits before the checkpoint: ``cdc_of``)
    cdc: dict[int, tuple[str, ...]] = field(default_factory=dict)
    partition_columns: tuple[str, ...] = ()
    configuration: dict[str, str] = field(default_factory=dict)
    #: the protocol's reader and writer features
    features: frozenset[str] = frozenset()
    has_metadata: bool = False
    #: the version of the checkpoint the replay began from (None: from the first commit)
    checkpoint_version: int | None = None
    #: each live file's deletion vector descriptor as its add carries it (files without one are absent)
    deletion_vectors: dict[str, DescriptorJson] = field(default_factory=dict)
    #: each live file's path exactly as its add spells it, where delta-rs' encoding of the decoded path
    #: would spell it otherwise (Spark writes non-ASCII characters raw): its remove must spell it so
    spellings: dict[str, str] = field(default_factory=dict)

    def put(self, removed: bool, path: str, dv: Mapping[str, Any] | None, deleted_at: int | None = None,
            spelled: str | None = None) -> None:
        """One add (``removed`` False) or remove of the decoded ``path`` with its deletion vector descriptor;
        ``spelled``: the action's path field as written."""
        if _is_absolute(path):
            path = relative_to_root(path, self.root)
        try:
            ref = FileRef(path, dv_file(dv, self.root) if dv else None, (deleted_at or 0) if removed else None)
        except ValueError as e:
            raise TableReadError(f"{self.root}: the log names a deletion vector compactor cannot resolve for "
                                 f"{path} ({e})") from None
        key = (path, dv_key(dv))
        if removed:
            self.live.pop(key, None)
            self.tombstones[key] = ref
            if dv and dv_key(self.deletion_vectors.get(path)) == key[1]:
                del self.deletion_vectors[path]
            if (path, dv_key(self.deletion_vectors.get(path))) not in self.live:  # a checkpoint lists adds first
                self.spellings.pop(path, None)
        else:
            self.tombstones.pop(key, None)
            self.live[key] = ref
            if spelled is not None and spelled_otherwise(path, spelled):
                self.spellings[path] = spelled
            else:
                self.spellings.pop(path, None)
            if dv:
                self.deletion_vectors[path] = descriptor(dv)
            else:
                self.deletion_vectors.pop(path, None)

    def add(self, action: Mapping[str, Any], path: str | None = None) -> None:
        """An add action; ``path``: its path decoded (a parsed commit's key), else its field is decoded here."""
        self.put(False, _decoded(action) if path is None else path, action.get("deletionVector"),
                 spelled=str(action["path"]))

    def remove(self, action: Mapping[str, Any], path: str | None = None) -> None:
        self.put(True, _decoded(action) if path is None else path, action.get("deletionVector"),
                 action.get("deletionTimestamp"))

    def apply(self, commit: Commit) -> None:
        """Replay the commit after ``version`` onto this state."""
        if commit.version != self.version + 1:
            raise TableReadError(f"{self.root}: the log replay expected version {self.version + 1}, "
                                 f"read {commit.version}")
        for path, action in commit.removes.items():  # keyed by the decoded path
            self.remove(action, path)
        for path, action in commit.adds.items():
            self.add(action, path)
        self.metadata(commit.metadata_action)
        self.protocol(commit.protocol_action)
        self.cdc[commit.version] = tuple(relative_to_root(p, self.root) for p in commit.cdc)
        self.version = commit.version

    def metadata(self, meta: Mapping[str, Any] | None) -> None:
        if meta is None:
            return
        self.has_metadata = True
        self.partition_columns = tuple(meta.get("partitionColumns") or ())
        conf = meta.get("configuration") or {}
        pairs = conf.items() if isinstance(conf, Mapping) else conf  # a Parquet map reads as (key, value) pairs
        self.configuration = {str(k): str(v) for k, v in pairs}

    def protocol(self, protocol: Mapping[str, Any] | None) -> None:
        if protocol is not None:
            self.features = frozenset([*(protocol.get("readerFeatures") or ()), *(protocol.get("writerFeatures") or ())])


@dataclass(frozen=True)
class LogListing:
    """What ``_delta_log`` holds: its commits (version -> the commit file's mtime, ms) and its complete
    checkpoints (version -> its files; a multi-part one's parts in order)."""

    commits: dict[int, int]
    checkpoints: dict[int, tuple[str, ...]]

    @property
    def newest(self) -> int:
        return max([*self.commits, *self.checkpoints], default=-1)


def list_log(storage: Storage) -> LogListing:
    """One listing of ``_delta_log``: commits and complete checkpoints (a multi-part one only when every
    part is there)."""
    objects, _ = storage.list_dir(LOG_DIR)
    commits: dict[int, int] = {}
    parts: dict[tuple[int, int], dict[int, str]] = {}
    checkpoints: dict[int, tuple[str, ...]] = {}
    for o in objects:
        name = o.path.rsplit("/", 1)[-1]
        if m := _COMMIT.match(name):
            commits[int(m.group(1))] = int(o.mtime * 1000)
        elif m := _V2.match(name):
            checkpoints[int(m.group(1))] = (o.path,)  # a v2 checkpoint is one file (and its sidecars)
        elif m := _CLASSIC.match(name):
            checkpoints.setdefault(int(m.group(1)), (o.path,))
        elif m := _MULTI.match(name):
            parts.setdefault((int(m.group(1)), int(m.group(3))), {})[int(m.group(2))] = o.path
    for (version, total), found in parts.items():
        if version not in checkpoints and set(found) == set(range(1, total + 1)):
            checkpoints[version] = tuple(found[k] for k in sorted(found))
    return LogListing(commits, checkpoints)


def replay(table: TableLocation, listing: LogListing | None = None) -> Replay:
    """The table's references at its newest version, from its newest complete checkpoint and the commits
    after it. Raises TableReadError when the log cannot be read with certainty."""
    storage = storage_for(table.uri, table.storage_options)
    state = Replay(root=table.uri)
    try:
        listing = listing or list_log(storage)
        newest = listing.newest
        if newest < 0:
            raise TableReadError(f"{table.uri}: no Delta log (nothing in {LOG_DIR})")
        base = max(listing.checkpoints, default=None)
        if base is not None:
            _read_checkpoint(storage, listing.checkpoints[base], state)
            state.version = state.checkpoint_version = base
        advance(state, table, newest)
    except StorageError as e:
        raise TableReadError(f"{table.uri}: cannot read the log: {e}") from None
    if not state.has_metadata:
        raise TableReadError(f"{table.uri}: corrupt log: no table metadata (metaData action) found")
    if state.features & _UNLISTED_COMMITS:
        raise TableReadError(f"{table.uri}: a catalog-managed table (its newest commits are held by its catalog)")
    unknown = sorted(state.features - KNOWN_FEATURES)
    if unknown:
        raise TableReadError(f"{table.uri}: the table uses feature(s) {', '.join(unknown)}, which compactor's log "
                             "replay does not know: it cannot prove which files they reference")
    return state


def advance(state: Replay, table: TableLocation, until: int | None = None) -> Replay:
    """Replay the commits after ``state.version`` onto it, up to ``until`` or the newest one (the first
    version with no commit file); a gap before ``until`` raises TableReadError."""
    v = state.version + 1
    while until is None or v <= until:
        commit = read_commit(table, v)
        if commit is None:
            if until is None:
                break
            raise TableReadError(f"{table.uri}: commit {v} is missing from {LOG_DIR} (the log cannot be replayed "
                                 "with certainty)")
        state.apply(commit)
        v += 1
    return state


def _read_checkpoint(storage: Storage, files: tuple[str, ...], state: Replay) -> None:
    """A checkpoint's file actions, metadata and protocol (and its sidecars') into ``state``."""
    sidecars: list[str] = []
    for path in files:
        if path.endswith(".json"):
            _json_checkpoint(storage.read_bytes(path).decode("utf-8"), state, sidecars)
        else:
            _parquet_checkpoint(storage, path, state, sidecars)
    for name in sidecars:  # the protocol keeps sidecars in _delta_log/_sidecars; a writer may name them whole
        absolute = name.startswith("/") or "://" in name or name.startswith("file:")
        _parquet_checkpoint(storage, relative_to_root(name, state.root) if absolute else f"{LOG_DIR}/_sidecars/{name}",
                            state, [])


def _json_checkpoint(text: str, state: Replay, sidecars: list[str]) -> None:
    for line in text.split("\n"):
        if not line.strip():
            continue
        obj = json.loads(line)
        if "add" in obj:
            state.add(obj["add"])
        elif "remove" in obj:
            state.remove(obj["remove"])
        elif "sidecar" in obj:
            sidecars.append(unquote(obj["sidecar"]["path"]))
        elif "metaData" in obj:
            state.metadata(obj["metaData"])
        elif "protocol" in obj:
            state.protocol(obj["protocol"])


#: the fields of each file action the replay reads from a Parquet checkpoint
_FIELDS = {"add": ("path", "deletionVector"), "remove": ("path", "deletionTimestamp", "deletionVector")}


def _parquet_checkpoint(storage: Storage, path: str, state: Replay, sidecars: list[str]) -> None:
    """One Parquet checkpoint part or sidecar; only the columns the replay needs are read."""
    import pyarrow.parquet as pq

    fs, base = storage.pyarrow_fs()
    try:
        pf = pq.ParquetFile(f"{base}/{path}", filesystem=fs)
    except FileNotFoundError:
        raise TableReadError(f"{state.root}: checkpoint file {path} is gone") from None
    schema = pf.schema_arrow
    for kind, fields in _FIELDS.items():
        if kind not in schema.names:
            continue
        have = {f.name for f in schema.field(kind).type}
        actions = pf.read(columns=[f"{kind}.{f}" for f in fields if f in have]).column(kind).combine_chunks()
        # column by column (a dict per row costs 3x as much); flatten() keeps a null action's fields null
        cols = {f.name: a.to_pylist() for f, a in zip(actions.type, actions.flatten())}
        paths = cols["path"]
        dvs, stamps = cols.get("deletionVector") or [None] * len(paths), cols.get("deletionTimestamp") or [None] * len(paths)
        removed = kind == "remove"
        for path, dv, stamp in zip(paths, dvs, stamps):
            if path is not None:  # null: a row of another action
                state.put(removed, unquote(path) if "%" in path else path, dv, stamp, path)
    if "sidecar" in schema.names:
        sidecars += [unquote(s["path"]) for s in pf.read(columns=["sidecar.path"]).column("sidecar").to_pylist()
                     if s is not None and s.get("path")]
    for kind, read in (("metaData", state.metadata), ("protocol", state.protocol)):
        if kind in schema.names:
            for value in pf.read(columns=[kind]).column(0).to_pylist():
                if value is not None:
                    read(value)
