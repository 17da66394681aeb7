"""compactor's Delta commits, written to the log as delta-spark writes its own: a rewrite is an ``OPTIMIZE``
with delta-spark's operationParameters (predicate, zOrderBy, clusterBy, auto) and operationMetrics
(numRemovedFiles, numAddedFiles, numRemovedBytes, numAddedBytes, the file-size percentiles), a purge a
``REORG`` (predicate, applyPurge) with the same metrics, a repair a
``COMPACTOR REPAIR``, a VACUUM compactor deletes itself a ``VACUUM START`` and a ``VACUUM END``; each carries
compactor's run id and action marker (top-level keys, and ``userMetadata``: the field `DESCRIBE HISTORY`
shows). delta-rs' ``create_write_transaction`` records every commit as ``WRITE``/``Append`` and refuses
``operation`` in its custom metadata, so these commits are written here: the next version's file created
only if absent (``Storage.create_exclusive``: a rename without replace on local disk, ``If-None-Match: *``
on object stores), as delta-rs and delta-spark create theirs.

A version another writer took first is read: when it removed a file this commit removes, or changed the
table's metadata or protocol, the commit is stale (nothing written); otherwise the next version is tried
(delta-rs' conflict check for a dataChange=false swap). After the commit, a checkpoint is written where
delta-rs' post-commit hook writes one (every ``delta.checkpointInterval`` versions, 100 by default).

The table features this writer honours, and how, are plan/support.py's COMPACTOR_WRITES: a remove is spelled
exactly as the log spelled its add (``remove_action``'s ``spelled``); with in-commit timestamps enabled the
commitInfo, always the first action, carries an ``inCommitTimestamp`` past the previous commit's.

Where compactor cannot write the commit itself, delta-rs does, as before (``fallback``): a table whose
protocol names a feature this writer does not honour (the plan leaves those alone), and a store the target
reaches through a locking provider (S3 with DynamoDB), which compactor's put-if-absent would bypass."""

from __future__ import annotations

import json
import logging
import statistics
import time
import uuid
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any
from urllib.parse import quote, unquote

from compactor import __version__
from compactor.errors import StalePlanError
from compactor.formats.delta.plan.support import DELTA_RS_UNWRITABLE, compactor_commits
from compactor.formats.delta.read.deletion_vectors import DescriptorJson
from compactor.formats.delta.read.facts import DeltaProtocol
from compactor.formats.delta.read.log import read_commit
from compactor.formats.delta.read.log_paths import DELTA_RS_SAFE
from compactor.models.table import TableLocation
from compactor.runtime.storage import storage_for

log = logging.getLogger(__name__)

#: delta-rs' post-commit hook writes a checkpoint every this many versions unless the table says otherwise
DEFAULT_CHECKPOINT_INTERVAL = 100


@dataclass(frozen=True)
class Operation:
    """What a commit did, as `DESCRIBE HISTORY` shows it: delta-spark's operation name, its parameters
    (JSON values: strings of JSON lists, booleans, numbers, as delta-spark writes them) and its metrics
    (numbers, written as strings)."""

    name: str
    parameters: Mapping[str, Any] = field(default_factory=dict)
    metrics: Mapping[str, int] = field(default_factory=dict)
    #: isBlindAppend: the commit only adds files it did not read (VACUUM's empty commits are)
    blind_append: bool = False


def _sql_literal(value: str | None) -> str:
    return "NULL" if value is None else "'" + value.replace("'", "''") + "'"


def partition_predicate(partitions: Iterable[Mapping[str, str | None]]) -> list[str]:
    """delta-spark's ``predicate`` of an OPTIMIZE ... WHERE over these partitions (one condition per
    partition, as `DESCRIBE HISTORY` lists them); [] for an unpartitioned table."""
    out = []
    for values in partitions:
        terms = [f"{c} IS NULL" if v is None else f"{c} = {_sql_literal(v)}" for c, v in values.items()]
        if terms:
            out.append("(" + " AND ".join(terms) + ")")
    return out


def file_size_metrics(removed: Sequence[int], added: Sequence[int], deletion_vectors: int = 0) -> dict[str, int]:
    """delta-spark OPTIMIZE's operationMetrics of files removed and added (sizes in bytes;
    ``deletion_vectors``: the removed files that carried one)."""
    metrics = {"numRemovedFiles": len(removed), "numRemovedBytes": sum(removed), "numAddedFiles": len(added),
               "numAddedBytes": sum(added), "numDeletionVectorsRemoved": deletion_vectors}
    if added:
        ordered = sorted(added)
        quartiles = statistics.quantiles(ordered, n=4, method="inclusive") if len(ordered) > 1 else [ordered[0]] * 3
        metrics.update({"minFileSize": ordered[0], "p25FileSize": int(quartiles[0]),
                        "p50FileSize": int(quartiles[1]), "p75FileSize": int(quartiles[2]),
                        "maxFileSize": ordered[-1]})
    return metrics


def optimize(partitions: Iterable[Mapping[str, str | None]], removed: Sequence[int], added: Sequence[int], *,
             z_order_by: Sequence[str] = (), deletion_vectors: int = 0) -> Operation:
    """An OPTIMIZE as delta-spark records one: compactor's rewrite of these partitions' files."""
    return Operation("OPTIMIZE", {"predicate": json.dumps(partition_predicate(partitions)),
                                  "zOrderBy": json.dumps(list(z_order_by)), "clusterBy": "[]", "auto": False},
                     file_size_metrics(removed, added, deletion_vectors))


def reorg_purge(partitions: Iterable[Mapping[str, str | None]], removed: Sequence[int], added: Sequence[int], *,
                deletion_vectors: int = 0) -> Operation:
    """A ``REORG TABLE ... APPLY (PURGE)`` as delta-spark records one (DeltaOperations.Reorg: the predicate,
    ``applyPurge``, OPTIMIZE's metrics): compactor's purge of these partitions on the local engine."""
    return Operation("REORG", {"predicate": json.dumps(partition_predicate(partitions)), "applyPurge": True},
                     file_size_metrics(removed, added, deletion_vectors))


def repair(removed: Sequence[int], added: Sequence[int], *, versions: Sequence[int], reverts: bool = False,
           extra_rows: int | None = None) -> Operation:
    """compactor's repair of rows live twice (delta-spark has no such operation): the versions it answers
    (or, ``reverts``, the version of compactor's own commit it undoes), and the files and bytes it removed
    and restored."""
    metrics = {"numRemovedFiles": len(removed), "numRemovedBytes": sum(removed), "numAddedFiles": len(added),
               "numAddedBytes": sum(added)}
    if extra_rows is not None:
        metrics["numDeduplicatedRows"] = extra_rows
    key = "revertOf" if reverts else "duplicatedBy"
    return Operation("COMPACTOR REPAIR", {key: json.dumps(list(versions))}, metrics)


def vacuum_start(files: int, retention_hours: float, default_retention_ms: int, size: int | None = None) -> Operation:
    """VACUUM START as delta-spark writes it, for compactor's own delete of the listed files (``size``: their
    bytes, where known)."""
    return Operation("VACUUM START", {"retentionCheckEnabled": True, "defaultRetentionMillis": default_retention_ms,
                                      "specifiedRetentionMillis": int(retention_hours * 3600 * 1000)},
                     {"numFilesToDelete": files, **({"sizeOfDataToDelete": size} if size is not None else {})},
                     blind_append=True)


def vacuum_end(deleted: int, directories: int) -> Operation:
    """VACUUM END as delta-spark writes it, once the files are deleted."""
    return Operation("VACUUM END", {"status": "COMPLETED"},
                     {"numDeletedFiles": deleted, "numVacuumedDirectories": directories}, blind_append=True)


def commit_info(op: Operation, read_version: int, metadata: Mapping[str, str], *,
                at_ms: int | None = None, in_commit_timestamp: int | None = None) -> dict[str, Any]:
    """The commitInfo action: delta-spark's fields, then compactor's metadata as top-level keys (compactor's
    log reader finds its commits by them) and as ``userMetadata`` (the one field `DESCRIBE HISTORY`
    shows). ``in_commit_timestamp``: the commit's time on a table with in-commit timestamps enabled, its
    first field, and its ``timestamp`` too (as delta-spark writes both)."""
    stamp = in_commit_timestamp if in_commit_timestamp is not None else \
        at_ms if at_ms is not None else int(time.time() * 1000)
    info: dict[str, Any] = {} if in_commit_timestamp is None else {"inCommitTimestamp": in_commit_timestamp}
    info |= {
        "timestamp": stamp, "operation": op.name, "operationParameters": dict(op.parameters),
        "readVersion": read_version, "isolationLevel": "SnapshotIsolation", "isBlindAppend": op.blind_append,
        "operationMetrics": {k: str(v) for k, v in op.metrics.items()}, "engineInfo": f"compactor/{__version__}",
        "txnId": str(uuid.uuid4()),
    }
    meta = dict(metadata)
    if meta:
        info["userMetadata"] = json.dumps(meta, sort_keys=True)
        info.update({k: v for k, v in meta.items() if k not in info})
    return info


def log_path(logical: str) -> str:
    """A new file's path as the log spells it: URL-encoded as delta-rs encodes it (log_paths.DELTA_RS_SAFE)."""
    return quote(logical, safe=DELTA_RS_SAFE)


def add_action(path: str, size: int, partition_values: Mapping[str, str | None], stats: str,
               now_ms: int, deletion_vector: DescriptorJson | None = None, *, spelled: str | None = None) -> dict[str, Any]:
    """An add; ``deletion_vector``: a file re-added as it was (a revert) keeps its descriptor, or the rows
    it deleted would be live again; ``spelled``: its path as the log spelled it before (a revert)."""
    add = {"path": spelled or log_path(path), "partitionValues": dict(partition_values), "size": int(size),
           "modificationTime": now_ms, "dataChange": False, "stats": stats}
    if deletion_vector:
        add["deletionVector"] = dict(deletion_vector)
    return {"add": add}


def remove_action(path: str, size: int, partition_values: Mapping[str, str | None], now_ms: int,
                  deletion_vector: DescriptorJson | None = None, *, tags: Mapping[str, str] | None = None,
                  stats: str | None = None, spelled: str | None = None) -> dict[str, Any]:
    """A remove as delta-spark writes one (AddFile.removeWithTimestamp): the file's path, partition values,
    size, tags, deletion vector descriptor and statistics as its add has them (a reader keys a file by its
    path and its vector's unique id: a remove without the descriptor retires nothing). ``spelled``: the path
    exactly as the log spelled the add, where delta-rs' encoding of the logical ``path`` would spell it
    otherwise (Spark writes non-ASCII characters raw; delta-spark compares paths as written)."""
    remove: dict[str, Any] = {"path": spelled or log_path(path), "deletionTimestamp": now_ms, "dataChange": False,
                              "extendedFileMetadata": True, "partitionValues": dict(partition_values),
                              "size": int(size)}
    if tags:
        remove["tags"] = dict(tags)
    if deletion_vector:
        remove["deletionVector"] = dict(deletion_vector)
    if stats:
        remove["stats"] = stats
    return {"remove": remove}


def writes_directly(dt: Any, where: TableLocation) -> bool:
    """Whether compactor writes this table's commits itself (else delta-rs does, recording WRITE)."""
    proto = dt.protocol()
    return compactor_commits(DeltaProtocol(proto.min_reader_version, proto.min_writer_version,
                                           tuple(proto.reader_features or ()), tuple(proto.writer_features or ())),
                             where.storage_options)


def in_commit_timestamp(dt: Any, where: TableLocation, version: int) -> int | None:
    """The ``inCommitTimestamp`` a commit at ``version`` must carry (PROTOCOL.md, In-Commit Timestamps: the
    later of now and one millisecond after the previous commit's), None where the table has them off."""
    config = dict(dt.metadata().configuration or {})
    if str(config.get("delta.enableInCommitTimestamps", "false")).lower() != "true":
        return None
    now = int(time.time() * 1000)
    previous = read_commit(where, version - 1) if version > 0 else None
    before = previous.info.get("inCommitTimestamp") if previous is not None else None
    if not isinstance(before, int) and version > 0:
        raise StalePlanError(f"{where.uri}: in-commit timestamps are on, but version {version - 1} carries none "
                             "(or is gone); nothing was committed", hint="re-plan")
    return max(now, (before if isinstance(before, int) else 0) + 1)


def write_commit(dt: Any, where: TableLocation, read_version: int, actions: Sequence[Mapping[str, Any]],
                 op: Operation, metadata: Mapping[str, str], *, fallback: Callable[[], None]) -> None:
    """Commit ``actions`` (adds and removes) with ``op``'s commitInfo at the first free version after
    ``read_version``; ``fallback`` commits them through delta-rs where compactor does not write itself.
    Raises StalePlanError (nothing written) when a version taken meanwhile removed one of the files this
    commit removes, or changed the table."""
    if not writes_directly(dt, where):
        fallback()
        return
    removes = {unquote(a["remove"]["path"]) for a in actions if "remove" in a}  # logical, as Commit keys them
    store = storage_for(where.uri, where.storage_options)
    version = read_version + 1
    while True:
        info = commit_info(op, read_version, metadata, in_commit_timestamp=in_commit_timestamp(dt, where, version))
        lines = [{"commitInfo": info}, *actions]
        data = ("\n".join(json.dumps(a, separators=(",", ":")) for a in lines) + "\n").encode()
        if store.create_exclusive(f"_delta_log/{version:020d}.json", data):
            break
        other = read_commit(where, version)
        if other is not None:
            gone = removes.intersection(other.removes)
            if gone:
                raise StalePlanError(f"version {version} removed {len(gone)} file(s) this commit removes (e.g. "
                                     f"{next(iter(gone))}); nothing was committed", hint="re-plan")
            if other.changes_table:
                raise StalePlanError(f"version {version} changed the table's schema, properties or protocol; "
                                     "nothing was committed", hint="re-plan")
        version += 1
    dt.update_incremental()
    _post_commit(dt, where, version)


def _post_commit(dt: Any, where: TableLocation, version: int) -> None:
    """What delta-rs' post-commit hook does after its own commits: a checkpoint every checkpointInterval
    versions, then the log's expired files cleaned up when the table allows it. Best effort: a commit
    stands without its checkpoint."""
    config = dict(dt.metadata().configuration or {})
    try:
        interval = int(config.get("delta.checkpointInterval") or DEFAULT_CHECKPOINT_INTERVAL)
    except ValueError:
        interval = DEFAULT_CHECKPOINT_INTERVAL
    if interval <= 0 or version % interval:
        return
    proto = dt.protocol()
    unknown = set(proto.writer_features or ()) & DELTA_RS_UNWRITABLE
    if unknown:  # delta-rs' checkpoint of a feature it does not know could drop its actions (domains)
        log.info("%s: no checkpoint written at version %d: delta-rs does not know writer feature(s) %s", where.uri,
                 version, ", ".join(sorted(unknown)))
        return
    try:
        dt.create_checkpoint()
        if str(config.get("delta.enableExpiredLogCleanup", "true")).lower() != "false":
            dt.cleanup_metadata()
    except Exception as e:  # noqa: BLE001 - delta-rs raises several types; the commit is in the log
        log.warning("%s: no checkpoint written at version %d (%s)", where.uri, version, str(e).splitlines()[0][:200])


def empty_commit(dt: Any, where: TableLocation, op: Operation, metadata: Mapping[str, str], *,
                 at_ms: int | None = None) -> int | None:
    """A commit of only its commitInfo (VACUUM START / VACUUM END, as delta-spark writes them) after the
    table's newest version (``at_ms``: its timestamp, default now); None where compactor does not write this
    table's commits itself (delta-rs cannot write an empty commit)."""
    if not writes_directly(dt, where):
        return None
    dt.update_incremental()
    store = storage_for(where.uri, where.storage_options)
    version: int = dt.version() + 1
    while True:
        info = commit_info(op, version - 1, metadata, at_ms=at_ms,
                           in_commit_timestamp=in_commit_timestamp(dt, where, version))
        data = json.dumps({"commitInfo": info}, separators=(",", ":")) + "\n"
        if store.create_exclusive(f"_delta_log/{version:020d}.json", data.encode()):
            dt.update_incremental()
            _post_commit(dt, where, version)
            return version
        version += 1
