"""Find and repair duplicate rewrites in a Delta table (the I/O around formats/delta/duplicates.py).

The scan window: the JSON commits still in ``_delta_log``, at most ``horizon`` of them, ending at the
latest version (or, for the post-commit guard and the watch, starting right after compactor's read
version). Not "since the last checkpoint": a checkpoint is written every 10 (delta-spark) or 100 (delta-rs)
commits whatever happens, so a duplicate often straddles one; log cleanup only deletes commits older than
``delta.logRetentionDuration`` (30 days) and only behind a checkpoint, so the newest commits are always
JSON. A horizon in commits (default 1000) bounds the cost of ``plan`` and ``inspect`` per table (one small
GET per commit on object stores, read 16 at a time) while covering far more than any real race: the two
commits of a duplicate are as far apart as the other job's runtime. A duplicate whose first removal is
older than the window cannot be seen; ``--horizon`` widens it.

Rows: from the log's ``numRecords`` when reporting; from the parquet footers (removed files stay on
storage until VACUUM) before a repair commits, with two checks:

1. the files the repair removes hold exactly the rows of the files the reverted commits consumed (the
   chain was a pure rewrite, nothing else is in those files);
2. rows removed - rows restored == the rows of the doubled files (everything not restored is a second
   copy of rows that stay live in the other commit's files).
"""

from __future__ import annotations

import json
import logging
import time
import uuid
from collections.abc import Iterable, Mapping
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from typing import Any

from compactor.errors import ApplyError, VerificationError
from compactor.formats.delta.commit import MARKER, commit_properties, find_commit
from compactor.formats.delta.duplicates import REPAIR_OF, Analysis, RepairPlan, analyse, describe, repair_plan
from compactor.formats.delta.log import Commit, commits_after, parse_commit, read_commit_text
from compactor.formats.delta.plan import DELTA_RS_UNWRITABLE
from compactor.runtime.paths import filesystem, join

log = logging.getLogger(__name__)

#: how many of the newest commits a scan reads at most
DEFAULT_HORIZON = 1000
_READERS = 16


# ----------------------------------------------------------------------------- reading the window


def read_window(uri: str, storage_options: Mapping[str, str] | None, *, until: int, start: int | None = None,
                horizon: int = DEFAULT_HORIZON) -> list[Commit]:
    """The consecutive JSON commits ``max(start, until - horizon + 1) .. until`` that still exist (the
    oldest ones may have been cleaned up), oldest first."""
    lo = max(0, until - max(1, horizon) + 1)
    if start is not None:
        lo = max(lo, start)
    versions = list(range(lo, until + 1))
    if not versions:
        return []
    with ThreadPoolExecutor(max_workers=min(_READERS, len(versions)), thread_name_prefix="delta-log") as pool:
        read = list(pool.map(lambda v: _read_rewrites_only(uri, v, storage_options), versions))
    out: list[Commit] = []
    for c in reversed(read):  # the contiguous run ending at ``until``
        if c is None:
            break
        out.append(c)
    return out[::-1]


def _read_rewrites_only(uri: str, version: int, storage_options: Mapping[str, str] | None) -> Commit | None:
    """A commit as the scan needs it: a commit without a single remove (an append, however large) cannot
    take part in a duplicate (neither as a rewrite nor as a repair), so its actions are not parsed."""
    text = read_commit_text(uri, version, storage_options)
    if text is None:
        return None
    if '"remove"' not in text:
        return Commit(version)
    return parse_commit(version, text)


def _live_paths(dt: Any) -> set[str]:
    import pyarrow as pa

    from compactor.formats.delta.state import _logical_paths

    actions = dt.get_add_actions(flatten=True)
    col = pa.chunked_array(actions.column("path"))
    return set(_logical_paths(col)[0].to_pylist()) if len(col) else set()


def _stats_rows(action: Mapping[str, Any] | None) -> int | None:
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


def _footer(uri: str, path: str, storage_options: Mapping[str, str] | None) -> int | None:
    import pyarrow.parquet as pq

    fs, p = filesystem(join(uri, path), storage_options)
    try:
        return pq.ParquetFile(p, filesystem=fs).metadata.num_rows
    except (FileNotFoundError, OSError):
        return None


def row_counts(uri: str, storage_options: Mapping[str, str] | None, analysis: Analysis, paths: Iterable[str], *,
               footers: bool) -> dict[str, int | None]:
    """Rows per path: footers first (``footers=True``: the file must still be on storage) or the log's
    numRecords first; the other as the fallback; None when neither is available."""
    paths = sorted(set(paths))
    out: dict[str, int | None] = {}
    need: list[str] = []
    for p in paths:
        n = None if footers else _stats_rows(analysis.last_add.get(p))
        if n is None:
            need.append(p)
        else:
            out[p] = n
    if need:
        with ThreadPoolExecutor(max_workers=min(8, len(need)), thread_name_prefix="footers") as pool:
            for p, n in zip(need, pool.map(lambda q: _footer(uri, q, storage_options), need)):
                out[p] = n if n is not None else _stats_rows(analysis.last_add.get(p))
    return out


# ----------------------------------------------------------------------------- detection


@dataclass
class Detection:
    uri: str
    version: int | None
    first_version: int | None
    analysis: Analysis
    rows: dict[str, int | None]

    @property
    def open(self) -> list[dict[str, Any]]:
        return [describe(d, self.rows) for d in self.analysis.open]

    @property
    def history(self) -> list[dict[str, Any]]:
        """Every duplicate found in the window, including those repaired since."""
        return [describe(d, self.rows) for d in self.analysis.duplicates]

    def window(self) -> dict[str, Any]:
        return {"first_version": self.first_version, "last_version": self.version,
                "commits": 0 if self.first_version is None or self.version is None
                else self.version - self.first_version + 1}


def detect(uri: str, storage_options: Mapping[str, str] | None = None, *, version: int | None = None,
           start: int | None = None, horizon: int = DEFAULT_HORIZON) -> Detection:
    """Duplicates in the window ending at ``version`` (default: the latest commit)."""
    if version is None:
        from deltalake import DeltaTable

        version = DeltaTable(uri, storage_options=dict(storage_options or {}) or None, without_files=True).version()
    commits = read_window(uri, storage_options, until=version, start=start, horizon=horizon)
    analysis = analyse(commits)
    rows = row_counts(uri, storage_options, analysis, {p for d in analysis.duplicates for p in d.files},
                      footers=False)
    return Detection(uri, version, commits[0].version if commits else None, analysis, rows)


# ----------------------------------------------------------------------------- repair


@dataclass
class RepairResult:
    """What ``repair`` did. status: clean (nothing to do), repaired, would_repair (dry run)."""

    uri: str
    status: str
    duplicates: list[dict[str, Any]] = field(default_factory=list)
    commits: list[int] = field(default_factory=list)  # the repair commits' versions
    files_removed: int = 0
    files_restored: int = 0
    rows_removed: int = 0
    rows_restored: int = 0
    version_before: int | None = None
    version_after: int | None = None
    window: dict[str, Any] = field(default_factory=dict)

    @property
    def rows_deduplicated(self) -> int:
        return self.rows_removed - self.rows_restored

    def to_dict(self) -> dict[str, Any]:
        return {"uri": self.uri, "status": self.status, "duplicates": self.duplicates,
                "repair_versions": self.commits, "files_removed": self.files_removed,
                "files_restored": self.files_restored, "rows_removed": self.rows_removed,
                "rows_restored": self.rows_restored, "rows_deduplicated": self.rows_deduplicated,
                "version_before": self.version_before, "version_after": self.version_after,
                "window": self.window}


class RepairError(ApplyError):
    """A duplicate was found that compactor will not repair automatically."""


def _check_rows(plan: RepairPlan, rows: Mapping[str, int | None]) -> tuple[int, int]:
    """Rows of the files removed == rows of the files the reverted rewrites consumed (from footers). With
    the plan's own check that every consumed file ends with exactly one live copy, rows removed == rows
    restored + rows that stay live in the other copy."""
    unknown = sorted({p for p in (*plan.remove, *plan.restore, *(p for _, p in plan.consumed))
                      if rows.get(p) is None})
    if unknown:
        raise VerificationError(f"cannot count the rows of {len(unknown)} file(s) the repair depends on (e.g. "
                                f"{unknown[0]}: vacuumed and without statistics); nothing was committed")
    removed = sum(rows[p] for p in plan.remove)  # type: ignore[misc]
    restored = sum(rows[p] for p in plan.restore)  # type: ignore[misc]
    consumed = sum(rows[p] for _, p in plan.consumed)  # type: ignore[misc]
    if removed != consumed:
        raise VerificationError(f"the files holding the extra copies have {removed} rows, the files the "
                                f"rewrites {list(plan.chain)} consumed {consumed}: not a pure rewrite; nothing "
                                "was committed")
    return removed, restored


def _exists(uri: str, path: str, storage_options: Mapping[str, str] | None) -> bool:
    import pyarrow.fs as pafs

    fs, p = filesystem(join(uri, path), storage_options)
    try:
        return fs.get_file_info(p).type == pafs.FileType.File
    except OSError:
        return False


def _touched_since(uri: str, storage_options: Mapping[str, str] | None, version: int, plan: RepairPlan) -> int | None:
    """The first commit after ``version`` that removed a file the repair removes, or added or removed a
    file it restores (the repair was planned on a stale view: plan it again)."""
    removes, restores = set(plan.remove), set(plan.restore)
    for c in commits_after(uri, version, storage_options):
        if removes & set(c.removes) or restores & (set(c.removes) | set(c.adds)):
            return c.version
    return None


def _actions(uri: str, storage_options: Mapping[str, str] | None, analysis: Analysis, plan: RepairPlan) -> list[Any]:
    from deltalake.transaction import AddAction, RemoveAction

    from compactor.engines.parquet_stats import footer_stats

    now = int(time.time() * 1000)
    actions: list[Any] = []
    for p in plan.remove:
        add = analysis.last_add.get(p) or {}
        actions.append(RemoveAction(p, False, now, int(add.get("size") or 0), dict(add.get("partitionValues") or {})))
    for p in plan.restore:
        last = analysis.last_add.get(p)
        rem = analysis.last_remove.get(p) or {}
        if last is not None:
            size, pv, stats = int(last.get("size") or 0), last.get("partitionValues"), last.get("stats")
        else:  # added before the window: size and partition values from its remove, stats from its footer
            size, pv, stats = int(rem.get("size") or 0), rem.get("partitionValues"), None
        if pv is None:
            raise RepairError(f"cannot restore {p}: its partition values are not in the log window")
        if not isinstance(stats, str) or not stats:
            fs, fp = filesystem(join(uri, p), storage_options)
            _, stats = footer_stats(fp, fs)
        if not size:
            fs, fp = filesystem(join(uri, p), storage_options)
            size = fs.get_file_info(fp).size
        actions.append(AddAction(p, size, dict(pv), now, False, stats))
    return actions


def repair(uri: str, storage_options: Mapping[str, str] | None = None, *, start: int | None = None,
           horizon: int = DEFAULT_HORIZON, commit_metadata: Mapping[str, str] | None = None, dry_run: bool = False,
           max_rounds: int = 4) -> RepairResult:
    """Repair every open duplicate in the window: one dataChange=false commit per round, re-planned from
    the log until a scan finds none (a concurrent writer can add one while we commit). Raises RepairError
    for a duplicate that cannot be reverted, VerificationError when the rows do not add up."""
    from deltalake import DeltaTable

    so = dict(storage_options or {}) or None
    result = RepairResult(uri, "clean")
    meta = dict(commit_metadata or {})
    for _ in range(max_rounds):
        # the window first, from a handle without the file list: most tables have nothing to repair
        v0 = DeltaTable(uri, storage_options=so, without_files=True).version()
        commits = read_window(uri, storage_options, until=v0, start=start, horizon=horizon)
        if start is None and commits:
            start = commits[0].version  # later rounds look at the same window (plus what came since)
        analysis = analyse(commits)
        result.window = {"first_version": commits[0].version if commits else None, "last_version": v0}
        if result.version_before is None:
            result.version_before = v0
        result.version_after = v0
        if not analysis.open:
            return result
        dt = DeltaTable(uri, storage_options=so, version=v0)
        unwritable = sorted(set(dt.protocol().writer_features or ()) & DELTA_RS_UNWRITABLE)
        if unwritable:
            raise RepairError(f"{uri}: {len(analysis.open)} duplicate rewrite(s) found, but delta-rs cannot commit "
                              f"the repair to a table with writer feature(s) {', '.join(unwritable)}",
                              hint="restore the table to the version before the duplicate (RESTORE)")
        live = _live_paths(dt)
        plan = repair_plan(analysis, live)
        rows = row_counts(uri, storage_options, analysis,
                          {*plan.remove, *plan.restore, *(p for _, p in plan.consumed),
                           *(p for d in analysis.open for p in d.files)}, footers=True)
        found = [describe(d, rows) for d in analysis.open]
        if plan.unrepairable:
            raise RepairError(f"{uri}: {len(analysis.open)} duplicate rewrite(s) found that compactor will not "
                              f"repair: {'; '.join(plan.unrepairable)}",
                              hint="restore the table to the version before the duplicate (RESTORE) or "
                                   "deduplicate by hand")
        with_dv = [p for p in (*plan.remove, *plan.restore)
                   if (analysis.last_add.get(p) or {}).get("deletionVector")
                   or (analysis.last_remove.get(p) or {}).get("deletionVector")]
        if with_dv:  # delta-rs' add/remove actions carry no deletion vector: the repair would revive rows
            raise RepairError(f"{uri}: the repair would touch {len(with_dv)} file(s) with deletion vectors (e.g. "
                              f"{with_dv[0]}), which delta-rs cannot commit faithfully",
                              hint="restore the table to the version before the duplicate (RESTORE)")
        missing = [p for p in plan.restore if not _exists(uri, p, storage_options)]
        if missing:
            raise RepairError(f"{uri}: {len(missing)} file(s) the repair must restore are gone from storage "
                              f"(vacuumed?), e.g. {missing[0]}", hint="deduplicate the rows by hand")
        removed_rows, restored_rows = _check_rows(plan, rows)
        if dry_run:
            result.status = "would_repair"
            result.duplicates += found
            result.files_removed, result.files_restored = len(plan.remove), len(plan.restore)
            result.rows_removed, result.rows_restored = removed_rows, restored_rows
            return result
        if _touched_since(uri, storage_options, v0, plan) is not None:
            continue  # planned on a stale view: plan again from the newer log
        marker = f"{meta.get(MARKER) or 'repair'}:repair:{uuid.uuid4().hex[:8]}"
        cm = {**meta, MARKER: marker, REPAIR_OF: ",".join(map(str, plan.duplicates)),
              "compactor.repair_chain": ",".join(map(str, plan.chain))}
        dt.create_write_transaction(_actions(uri, storage_options, analysis, plan), mode="append",
                                    schema=dt.schema(), partition_by=list(dt.metadata().partition_columns),
                                    commit_properties=commit_properties(cm))
        own = find_commit(uri, storage_options, v0, marker)
        if own is None:
            raise ApplyError(f"{uri}: the repair committed but its commit (marker {marker}) is not in the log")
        log.warning("%s: repaired %d duplicate rewrite(s) (versions %s) in version %d: %d file(s) removed, %d "
                    "restored, %d duplicated row(s) gone", uri, len(found), list(plan.duplicates), own.version,
                    len(plan.remove), len(plan.restore), removed_rows - restored_rows)
        result.status = "repaired"
        result.duplicates += found
        result.commits.append(own.version)
        result.files_removed += len(plan.remove)
        result.files_restored += len(plan.restore)
        result.rows_removed += removed_rows
        result.rows_restored += restored_rows
    raise ApplyError(f"{uri}: duplicates were still found after {max_rounds} repair rounds (another writer keeps "
                     "rewriting the same files?)", hint="stop the other compaction job and run `compactor repair`")


def removals_after(uri: str, storage_options: Mapping[str, str] | None,
                   version: int) -> tuple[int, dict[str, list[int]]]:
    """(last version read, {path: versions that removed it}) for the commits after ``version``: the watch
    polls with this."""
    last = version
    found: dict[str, list[int]] = {}
    for c in commits_after(uri, version, storage_options):
        last = c.version
        for p in c.removes:
            found.setdefault(p, []).append(c.version)
    return last, found
