"""The delta-spark fuzzer's checks (tests/fuzz/spark_history.py), none of them read through compactor's code:

- the table's snapshot replayed here from its JSON commits (``LogReplay``: file actions reconciled by path and
  deletion vector as PROTOCOL.md says, deletion vector files named from their descriptors), and delta-spark's
  own snapshot (``delta_spark_snapshot``), which must agree with it;
- after every step (``Checks.step``): every file the snapshot references is on storage (live files, their
  deletion vectors, and the files and vectors of tombstones within the table's retention), and, outside a
  VACUUM, no file a commit names (added, removed, change data), no deletion vector and no log file was deleted;
- around compactor's VACUUM: it deletes only files delta-spark's own VACUUM would delete (its dry run);
- around a refused action: nothing changed (``Checks.unchanged``).

Every commit since version 0 stays on storage in these histories (the log's retention is 30 days and the log
is never aged), so the replay needs no checkpoint.
"""

from __future__ import annotations

import json
import os
import re
import time
import uuid
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any
from urllib.parse import unquote, urlparse

#: Z85, the base85 alphabet of deletion vector file ids (PROTOCOL.md, "Deletion Vector Format")
Z85 = "0123456789abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ.-:+=^!/*?&<>()[]{}@%$#"
COMMIT = re.compile(r"\d{20}\.json")


class Failure(AssertionError):
    """An invariant broke: the message says which; the history says how."""


def z85_uuid(text: str) -> uuid.UUID:
    raw = b""
    for i in range(0, len(text), 5):
        n = 0
        for c in text[i:i + 5]:
            n = n * 85 + Z85.index(c)
        raw += n.to_bytes(4, "big")
    return uuid.UUID(bytes=raw)


def dv_file(dv: dict[str, Any]) -> str | None:
    """The file of a deletion vector: relative to the table for storage type ``u`` (a random prefix, then
    the file id in 20 base85 characters), absolute for ``p``; None inline."""
    kind, where = dv["storageType"], dv["pathOrInlineDv"]
    if kind == "i":
        return None
    if kind == "p":
        return unquote(urlparse(where).path)
    prefix, name = where[:-20], f"deletion_vector_{z85_uuid(where[-20:])}.bin"
    return f"{prefix}/{name}" if prefix else name


def file_kind(rel: str) -> str:
    """What a file under a Delta table is, by its name: a deletion vector, change data, a hidden file (a name
    starting with ``.`` or ``_``, which delta-spark's VACUUM never deletes: Spark's ``.crc`` checksums), data."""
    name = rel.rsplit("/", 1)[-1]
    if re.fullmatch(r"deletion_vector_.*\.bin", name):
        return "deletion vector"
    if rel.startswith("_change_data/"):
        return "change data"
    return "hidden" if any(part.startswith((".", "_")) and "=" not in part for part in rel.split("/")) else "data"


def dv_id(dv: dict[str, Any] | None) -> str | None:
    if dv is None:
        return None
    offset = dv.get("offset")
    return dv["storageType"] + dv["pathOrInlineDv"] + ("" if offset is None else f"@{offset}")


@dataclass(frozen=True)
class Meta:
    """The table's metadata at one version as its log holds it."""

    value: str = "val"  # the value column's name (column mapping renames it)
    note: bool = False  # the nullable column added and dropped
    partitioned: bool = False
    clustered: bool = False
    cdf: bool = False
    dv: bool = False
    colmap: bool = False
    #: a column-mapped table's column was dropped (its max column id is above its columns' count)
    dropped_column: bool = False
    #: some live file carries a deletion vector
    dv_files: bool = False
    row_tracking: bool = False
    v2_checkpoints: bool = False
    retention_h: int = 168

    def features(self) -> list[str]:
        """The features on: what compactor's commits are counted by."""
        named = {"deletion vectors": self.dv, "files with deletion vectors": self.dv_files,
                 "change data feed": self.cdf, "column mapping": self.colmap,
                 "column mapping, a renamed column": self.colmap and self.value != "val",
                 "column mapping, a dropped column": self.dropped_column, "clustering": self.clustered, "row tracking": self.row_tracking, "v2 checkpoints": self.v2_checkpoints}
        return [k for k, on in named.items() if on] or ["none"]


@dataclass
class CommitFacts:
    """One commit as its JSON holds it: its commitInfo, its adds, and its removes each with the add it removed
    (None when the replay had no live add for that path and deletion vector)."""

    info: dict[str, Any] = field(default_factory=dict)
    adds: list[dict[str, Any]] = field(default_factory=list)
    removes: list[tuple[dict[str, Any], dict[str, Any] | None]] = field(default_factory=list)

    def metadata(self, key: str) -> str | None:
        """A custom commit metadata value: a top-level commitInfo key (delta-rs, compactor's log writer) or
        one in ``userMetadata``'s JSON (delta-spark)."""
        if isinstance(self.info.get(key), str):
            return str(self.info[key])
        try:
            meta = json.loads(self.info.get("userMetadata") or "{}")
        except ValueError:
            return None
        return meta.get(key) if isinstance(meta, dict) else None


@dataclass
class LogReplay:
    """The snapshot at the newest commit, replayed from every JSON commit in order."""

    table: Path
    version: int = -1
    #: (path, deletion vector id) -> the add / the remove (the newest action for that pair)
    live: dict[tuple[str, str | None], dict[str, Any]] = field(default_factory=dict)
    tombstones: dict[tuple[str, str | None], dict[str, Any]] = field(default_factory=dict)
    #: every file a commit named: added, removed, change data, and their deletion vectors
    named: set[str] = field(default_factory=set)
    metadata: dict[str, Any] = field(default_factory=dict)
    clustering: list[Any] = field(default_factory=list)
    #: version -> what that commit did
    commits: dict[int, CommitFacts] = field(default_factory=dict)

    def update(self) -> LogReplay:
        log = self.table / "_delta_log"
        versions = sorted(int(f[:20]) for f in os.listdir(log) if COMMIT.fullmatch(f))
        assert versions[0] == 0 and versions == list(range(len(versions))), f"the log has gaps: {versions}"
        for v in versions[self.version + 1:]:
            self.commits[v] = facts = CommitFacts()
            for line in (log / f"{v:020d}.json").read_text().splitlines():
                if line.strip():
                    self._apply(json.loads(line), facts)
            self.version = v
        return self

    def _apply(self, action: dict[str, Any], facts: CommitFacts) -> None:
        if "commitInfo" in action:
            facts.info = action["commitInfo"]
        for kind in ("add", "remove", "cdc"):
            if kind not in action:
                continue
            a = action[kind]
            path, dv = unquote(a["path"]), a.get("deletionVector")
            self.named.add(path)
            if dv is not None and (f := dv_file(dv)) is not None:
                self.named.add(f)
            key = (path, dv_id(dv))
            if kind == "add":
                self.live[key] = a
                self.tombstones.pop(key, None)
                facts.adds.append(a)
            elif kind == "remove":
                facts.removes.append((a, self.live.pop(key, None)))
                self.tombstones[key] = a
        if "metaData" in action:
            self.metadata = action["metaData"]
        d = action.get("domainMetadata")
        if d and d["domain"] == "delta.clustering":
            self.clustering = [] if d.get("removed") else json.loads(d["configuration"])["clusteringColumns"]

    def meta(self) -> Meta:
        conf = self.metadata.get("configuration", {})
        fields = [f["name"] for f in json.loads(self.metadata["schemaString"])["fields"]]
        retention = conf.get("delta.deletedFileRetentionDuration", "interval 7 days")
        return Meta(value=fields[2], note="note" in fields, partitioned=bool(self.metadata.get("partitionColumns")),
                    clustered=bool(self.clustering), cdf=conf.get("delta.enableChangeDataFeed") == "true",
                    dv=conf.get("delta.enableDeletionVectors") == "true",
                    colmap=conf.get("delta.columnMapping.mode") == "name",
                    dropped_column=int(conf.get("delta.columnMapping.maxColumnId") or 0) > len(fields),
                    dv_files=any(dv is not None for _, dv in self.live), row_tracking=conf.get("delta.enableRowTracking") == "true",
                    v2_checkpoints=conf.get("delta.checkpointPolicy") == "v2",
                    retention_h=int(re.findall(r"\d+", retention)[0]) * (24 if "day" in retention else 1))

    def referenced(self, horizon_ms: float) -> Iterator[tuple[str, str]]:
        """(what, file) for every file a reader or a time travel within the retention needs: live files, their
        deletion vectors, and those of tombstones removed after ``horizon_ms``."""
        for what, actions in (("live file", self.live.values()), ("removed file within the retention", [
                r for r in self.tombstones.values() if (r.get("deletionTimestamp") or 0) > horizon_ms])):
            for a in actions:
                yield what, unquote(a["path"])
                if a.get("deletionVector") and (f := dv_file(a["deletionVector"])) is not None:
                    yield f"{what}'s deletion vector", f


class Checks:
    def __init__(self, spark: Any, path: Path) -> None:
        self.spark, self.path = spark, path
        self.replay = LogReplay(path)
        self._kept: set[str] = set()
        self._vacuumed_ms = 0.0
        #: files a killed apply wrote and never committed: its next run's recovery deletes them
        self.orphans: set[str] = set()

    # ------------------------------------------------------------------ storage

    def files(self) -> Iterator[str]:
        """Every file under the table, relative, but compactor's own (``_compactor``, staging folders)."""
        for root, dirs, names in os.walk(self.path):
            dirs[:] = [d for d in dirs if d != "_compactor" and not d.startswith("_compactor_staging")]
            rel = os.path.relpath(root, self.path)
            for n in names:
                yield n if rel == "." else f"{rel}/{n}"

    def data_files(self) -> list[str]:
        return [f for f in self.files() if not f.startswith("_delta_log/")]

    def stored(self) -> dict[str, tuple[int, float]]:
        out = {}
        for f in self.files():
            st = os.stat(self.path / f)
            out[f] = (st.st_size, st.st_mtime)
        return out

    def _must_stay(self) -> set[str]:
        """Files on storage that no step but a VACUUM may delete."""
        on = set(self.files())
        dv = {f for f in on if re.search(r"(^|/)deletion_vector_[^/]*\.bin$", f)}
        logs = {f for f in on if f.startswith("_delta_log/") and not f.rsplit("/", 1)[-1].startswith(".")}
        return (on & self.replay.named) | dv | logs

    # ------------------------------------------------------------------ after every step

    def start(self) -> None:
        self.replay.update()
        self._kept = self._must_stay()

    def vacuumed(self) -> None:
        """A VACUUM ran: what it deleted is checked against delta-spark's own dry run (``vacuum_listing``). A
        tombstone it was allowed to take (at the retention then) stays taken when the retention is raised."""
        self.replay.update()
        self._kept = self._must_stay()
        self._vacuumed_ms = time.time() * 1000

    def step(self, retention_h: int) -> None:
        self.replay.update()
        gone = sorted(f for f in self._kept if not (self.path / f).exists())
        if gone:
            raise Failure(f"{len(gone)} file(s) deleted outside a VACUUM: {gone[:5]}")
        missing = [f"{what} {f}" for what, f in self.replay.referenced(self._horizon(retention_h))
                   if not (self.path / f).exists()]
        if missing:
            raise Failure(f"the log references {len(missing)} missing file(s): {missing[:5]}")
        self._kept = self._must_stay()

    def _horizon(self, retention_h: int) -> float:
        # a minute's slack at the retention's edge; none after a VACUUM (it ended after all it deleted)
        return max(time.time() * 1000 - retention_h * 3600 * 1000 + 60_000, self._vacuumed_ms)

    def killed(self, before: dict[str, tuple[int, float]]) -> None:
        """An apply was killed: what it wrote that no commit names is its own, for recovery to delete."""
        named = self.replay.update().named
        self.orphans |= {f for f in self.stored().keys() - before.keys() if f not in named}

    def unchanged(self, before: dict[str, tuple[int, float]], version: int) -> None:
        """A refused action changed nothing: no commit, no file added, deleted or rewritten (but the
        recovery of what a killed apply wrote: ``orphans``)."""
        after = self.stored()
        now = self.replay.update().version
        recovered = {f for f in self.orphans if f in before and f not in after}
        self.orphans -= recovered
        changed = sorted(f for f in before.keys() | after.keys() if before.get(f) != after.get(f) and f not in recovered)
        if now != version or changed:
            raise Failure(f"refused, yet the table changed: version {version} -> {now}, files {changed[:5]}")

    # ------------------------------------------------------------------ delta-spark's own view

    def vacuum_listing(self) -> set[str]:
        """What delta-spark's VACUUM at the table's retention would delete now (its dry run), relative."""
        rows = self.spark.sql(f"VACUUM delta.`{self.path}` DRY RUN").collect()
        return {os.path.relpath(unquote(urlparse(str(r[0])).path), self.path) for r in rows}

    def delta_spark_snapshot(self, retention_h: int) -> None:
        """delta-spark's own snapshot: the live files and deletion vectors it names are the replay's, and
        they, and the files and vectors of its tombstones within the retention, are on storage."""
        jvm = self.spark._jvm
        delta_log = jvm.org.apache.spark.sql.delta.DeltaLog.forTable(self.spark._jsparkSession, str(self.path))
        snap = delta_log.update(False, jvm.scala.Option.empty(), jvm.scala.Option.empty())
        root, horizon = delta_log.dataPath(), self._horizon(retention_h)
        self.replay.update()
        assert snap.version() == self.replay.version, (snap.version(), self.replay.version)

        def named(files: Any, keep: Any = None) -> set[tuple[str, str | None]]:
            items, out = files.collectAsList(), set()
            for i in range(items.size()):
                a = items.get(i)
                if keep is not None and not keep(a):
                    continue
                dv = a.deletionVector()
                where = dv.absolutePath(root).toUri().getPath() if dv is not None and dv.isOnDisk() else None
                out.add((a.absolutePath(delta_log).toUri().getPath(), where))
            return out

        def ours(actions: Any) -> set[tuple[str, str | None]]:
            out = set()
            for a in actions:
                f = dv_file(a["deletionVector"]) if a.get("deletionVector") else None
                out.add((str(self.path / unquote(a["path"])), None if f is None else str(self.path / f)))
            return out

        live = named(snap.allFiles())
        if live != ours(self.replay.live.values()):
            raise Failure(f"delta-spark's snapshot and the replay differ: {sorted(live ^ ours(self.replay.live.values()))[:5]}")
        removed = named(snap.tombstones(), lambda r: r.delTimestamp() > horizon)
        missing = sorted(p for pair in live | removed for p in pair if p is not None and not os.path.exists(p))
        if missing:
            raise Failure(f"delta-spark's snapshot references {len(missing)} missing file(s): {missing[:5]}")
