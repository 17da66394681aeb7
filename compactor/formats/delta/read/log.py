"""Reading single Delta commits (``_delta_log/<version>.json``) without replaying the log.

Paths are returned decoded (logical), like TableState paths: the log stores them URL-encoded."""

from __future__ import annotations

import json
import re
import threading
from collections import OrderedDict
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field
from typing import Any
from urllib.parse import unquote

import orjson

from compactor.models.table import TableLocation
from compactor.runtime.gc_pause import gc_paused
from compactor.runtime.paths import join
from compactor.runtime.storage import ObjectNotFoundError, storage_for


def _loads(line: str) -> Any:
    """One JSON line of a commit, as Python's json reads it: orjson (2.5x faster), and Python's json for
    what orjson refuses (NaN, Infinity, lone surrogates). One difference remains: orjson reads an integer
    beyond 64 bits as a float. The Delta protocol's numbers are 64-bit longs (size, modificationTime,
    deletion vector offsets, row ids), so no value compactor reads or writes back can be one."""
    try:
        return orjson.loads(line)
    except orjson.JSONDecodeError:
        return json.loads(line)


class LoggedAction(Mapping[str, Any]):
    """An add or remove action of a commit, read from its JSON line when a field is first asked for. A
    scan of the log needs only the paths of most adds (an append's files are never looked at again), and
    parsing every line was most of a large window's read (2.2 us per line of 200,000 adds). The path, the
    commit's key for the action, is taken from the line without parsing it only when the line starts
    the way Delta writers write it and the path has no escape (``_PLAIN_ACTION``); any other line is
    parsed whole at once, as before."""

    __slots__ = ("_line", "_kind", "_parsed")

    def __init__(self, line: str, kind: str) -> None:
        self._line = line
        self._kind = kind
        self._parsed: dict[str, Any] | None = None

    def _action(self) -> dict[str, Any]:
        if self._parsed is None:
            self._parsed = _loads(self._line)[self._kind]
        return self._parsed

    def __getitem__(self, key: str) -> Any:
        return self._action()[key]

    def __iter__(self) -> Iterator[str]:
        return iter(self._action())

    def __len__(self) -> int:
        return len(self._action())

    def __repr__(self) -> str:
        return f"LoggedAction({self._action()!r})"


#: an add or remove line whose path comes first and holds no escape and no control character: such a
#: JSON string's text is its value. delta-rs and delta-spark write no spaces; Python's json writes ": "
_PLAIN_ACTION = re.compile(r'\{"(add|remove)": ?\{"path": ?"([^"\\\x00-\x1f]*)"')


def num_records(action: Mapping[str, Any] | None) -> int | None:
    """The rows an add action's statistics record (``stats.numRecords``); None when it has none."""
    if not action:
        return None
    stats = action.get("stats")
    if isinstance(stats, str):
        try:
            stats = json.loads(stats)
        except ValueError:
            return None
    n = stats.get("numRecords") if isinstance(stats, Mapping) else None
    return int(n) if n is not None else None


@dataclass
class Commit:
    """One Delta commit as read: its adds and removes by path, its commitInfo, its metaData and protocol actions."""

    version: int
    #: by decoded path (each a plain dict or a LoggedAction: read them as Mappings)
    adds: dict[str, Mapping[str, Any]] = field(default_factory=dict)
    removes: dict[str, Mapping[str, Any]] = field(default_factory=dict)
    info: dict[str, Any] = field(default_factory=dict)
    #: the commit's ``metaData`` action (schema, partitioning, properties, column mapping), if it has one
    metadata_action: dict[str, Any] | None = None
    #: the commit's ``protocol`` action, if it has one (RESTORE and feature upgrades write one)
    protocol_action: dict[str, Any] | None = None
    #: the decoded paths of its ``cdc`` actions (change data files, for change data feed readers)
    cdc: list[str] = field(default_factory=list)

    @property
    def changes_table(self) -> bool:
        """True when the commit changes the table's schema, properties or protocol: a rewrite read before it
        would write files for a table that no longer exists in that form (Delta's MetadataChangedException /
        ProtocolChangedException)."""
        return self.metadata_action is not None or self.protocol_action is not None

    @property
    def operation(self) -> str:
        """commitInfo.operation (WRITE, DELETE, RESTORE, OPTIMIZE, ...), "" when the writer gave none."""
        op = self.info.get("operation")
        return op if isinstance(op, str) else ""

    @property
    def data_change(self) -> bool:
        """True when any add or remove changes data (appends, deletes, merges); False for rewrites."""
        return any(a.get("dataChange", True) for a in self.adds.values()) or \
            any(r.get("dataChange", True) for r in self.removes.values())

    def metadata(self, key: str) -> str | None:
        """A custom commit metadata value (delta-rs puts it in commitInfo, Spark in userMetadata)."""
        if key in self.info:
            value = self.info[key]
            return value if isinstance(value, str) else None
        meta = self.info.get("userMetadata") or self.info.get("custom_metadata")
        if isinstance(meta, str):
            try:
                meta = json.loads(meta)
            except ValueError:
                return None
        return meta.get(key) if isinstance(meta, Mapping) else None


def commit_path(uri: str, version: int) -> str:
    return join(uri, f"_delta_log/{version:020d}.json")


def parse_commit(version: int, text: str) -> Commit:
    with gc_paused():
        return _parse(version, text)


def _parse(version: int, text: str) -> Commit:
    c = Commit(version)
    match = _PLAIN_ACTION.match
    for line in text.split("\n"):  # a commit is newline-delimited: a value may hold U+2028 or U+0085 raw
        m = match(line)
        if m is not None:
            kind, path = m.group(1, 2)
            (c.adds if kind == "add" else c.removes)[unquote(path) if "%" in path else path] = LoggedAction(line, kind)
            continue
        if not line.strip():
            continue
        obj = _loads(line)
        if "add" in obj:
            c.adds[unquote(obj["add"]["path"])] = obj["add"]
        elif "remove" in obj:
            c.removes[unquote(obj["remove"]["path"])] = obj["remove"]
        elif "commitInfo" in obj:
            c.info = obj["commitInfo"]
        elif "metaData" in obj:
            c.metadata_action = obj["metaData"]
        elif "protocol" in obj:
            c.protocol_action = obj["protocol"]
        elif "cdc" in obj:
            c.cdc.append(unquote(obj["cdc"]["path"]))
    return c


#: parsed commits by (table, version): a commit never changes once written, and apply reads the same
#: recent commits again for every action (re-check, finding its own commit, the overlap scan)
_CACHE: OrderedDict[tuple[str, int], Commit] = OrderedDict()
_LOCK = threading.Lock()
_CACHE_SIZE = 512
#: bigger commits (a bulk load) are not kept
_CACHE_MAX_ACTIONS = 10_000


def read_commit(table: TableLocation, version: int) -> Commit | None:
    """The commit of ``version``, or None when it does not exist (not yet written, or cleaned up). Any
    other failure to read it (network, permissions) raises StorageError: "no commit" must mean exactly
    that, or a re-check would miss a concurrent commit."""
    key = (table.uri, version)
    with _LOCK:
        cached = _CACHE.get(key)
        if cached is not None:
            _CACHE.move_to_end(key)
            return cached
    text = read_commit_text(table, version)
    commit = parse_commit(version, text) if text is not None else None
    if commit is not None and len(commit.adds) + len(commit.removes) <= _CACHE_MAX_ACTIONS:
        with _LOCK:
            _CACHE[key] = commit
            if len(_CACHE) > _CACHE_SIZE:
                _CACHE.popitem(last=False)
    return commit


def read_commit_text(table: TableLocation, version: int) -> str | None:
    """The raw text of a commit, or None when it does not exist."""
    try:
        data = storage_for(table.uri, table.storage_options).read_bytes(f"_delta_log/{version:020d}.json")
    except ObjectNotFoundError:
        return None
    return data.decode("utf-8")


def commits_after(table: TableLocation, version: int, until: int | None = None) -> Iterator[Commit]:
    """Commits version+1, version+2, ... up to ``until`` (inclusive) or the first one missing."""
    v = version + 1
    while until is None or v <= until:
        c = read_commit(table, v)
        if c is None:
            return
        yield c
        v += 1
