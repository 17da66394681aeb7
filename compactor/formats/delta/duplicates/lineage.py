"""Rows live twice: anomalies found from the lineage of every file in the log (PURE: no I/O here).

The hazard (delta-compaction.md, "DANGER"): delta-rs 1.6 lets two ``dataChange=false`` commits remove the
same files. Both commit, and the rows of those files are then live twice. In a log that has exactly one
signature: a ``dataChange=false`` commit removes a file that is not live (an earlier commit removed it and
nobody re-added it since). Its adds hold that file's rows a second time; the earlier commit's adds hold
them already.

``analyse`` replays EVERY commit of the window in order (appends, DELETE/UPDATE/MERGE, RESTORE, which
re-adds removed files, rewrites, repairs, metadata changes) and keeps per path: whether it is live, the
commit that last removed it, the commit that consumed it (removed it while it was live), the commit that
produced it, and which anomalies' extra rows its content holds (``carries``; every commit that consumes a
file passes what it carries on to the files it adds, whatever kind of commit it is).

Anomalies (``Anomaly.kind``):

- ``double_remove``: a dataChange=false commit removed files that were not live (its *strays*) and added
  files: those hold the strays' rows a second time.
- ``readd``: a dataChange=false commit that is not compactor's repair re-added a removed file: its rows
  are back although the commit that removed it had put them elsewhere.
- ``stale_repair``: a compactor repair commit removed files another commit had removed first (it raced a
  rewrite): the files it restored duplicate rows that rewrite already holds.

Status at the end of the window: ``open`` while a live file carries it and every carrier descends from
it through rewrites only; ``unrepairable`` while a live file carries it through a data change (an UPDATE,
MERGE or DELETE rewrote a file holding the extra rows: which rows are extra can no longer be told), or
when the file it removed a second time had first been removed by a data change (rows that were deleted
came back); ``repaired`` when a compactor repair commit named it and removed its carriers (the repair was
checked by content before it committed); ``gone`` when no live file carries it any more (a DELETE of whole
files, a RESTORE to before it).

Only the window's commits are known. A path whose first action in the window is a remove is taken to
have been live before the window (the normal case: a file written before the window, compacted in it),
so a double removal whose first removal lies before the window is not seen; the window's size
(``horizon``) bounds that. Nothing outside the window is ever assumed to hold a copy of anything.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

from compactor.formats.delta.read.log import Commit
from compactor.models.duplicates import DuplicateReport
from compactor.runtime.gc_pause import gc_paused

#: commit metadata of compactor's repair commits: the versions of the anomalies it repairs
REPAIR_OF = "compactor.repair_of"
#: commit metadata of a repair commit: {copy path: original path} for rows restored into a new file
REPAIR_COPIES = "compactor.repair_copies"
#: commit metadata of compactor's revert of its own commit (the post-commit guard): that commit's version
REVERT_OF = "compactor.revert_of"

KINDS = ("double_remove", "readd", "stale_repair")
STATUSES = ("open", "unrepairable", "repaired", "gone")


@dataclass
class Anomaly:
    """One commit that made rows live twice."""

    version: int
    kind: str
    #: the files whose rows are the extra copy (strays removed a second time, or files re-added) -> the
    #: version that had removed them before (None: a file the commit itself added, for stale_repair)
    excess: dict[str, int | None]
    status: str = "open"
    reason: str = ""
    repaired_by: int | None = None

    @property
    def earlier_versions(self) -> list[int]:
        return sorted({v for v in self.excess.values() if v is not None})


@dataclass
class Lineage:
    """The result of a replay (``analyse``)."""

    first_version: int | None
    last_version: int | None
    commits: dict[int, Commit]
    #: live path -> its latest add action
    live: dict[str, Mapping[str, Any]]
    #: removed path -> the version that removed it last (paths removed and not re-added since)
    removed: dict[str, int]
    #: path -> the version that last removed it while it was live (the commit that holds its rows now)
    consumed_by: dict[str, int]
    #: path -> the version of its latest add
    produced_by: dict[str, int]
    #: path -> the anomalies (by version) whose extra rows its content holds
    carries: dict[str, frozenset[int]]
    anomalies: list[Anomaly]
    #: the latest add / remove action seen per path (size, partition values, stats, deletion vector)
    last_add: dict[str, Mapping[str, Any]]
    last_remove: dict[str, Mapping[str, Any]]
    #: versions whose commit changed the schema, properties or protocol
    table_changes: list[int] = field(default_factory=list)
    #: anomalies (by version) carried forward by a data change -> that commit's version
    tainted: dict[int, int] = field(default_factory=dict)
    #: per commit that consumed files: the paths it removed while live (the strays are not among them)
    live_removes: dict[int, tuple[str, ...]] = field(default_factory=dict)
    #: per commit: the files it added that never existed before (not re-adds)
    new_files: dict[int, tuple[str, ...]] = field(default_factory=dict)

    def moves_content(self, version: int) -> bool:
        """The commit wrote new files (a rewrite, an UPDATE/MERGE/DELETE that copied rows), as opposed to
        one that only removed files or re-added old ones (a whole-file DELETE, a RESTORE)."""
        return bool(self.new_files.get(version))

    @property
    def open(self) -> list[Anomaly]:
        return [a for a in self.anomalies if a.status == "open"]

    @property
    def unrepairable(self) -> list[Anomaly]:
        return [a for a in self.anomalies if a.status == "unrepairable"]

    @property
    def current(self) -> list[Anomaly]:
        """Anomalies whose extra rows are live now (open or unrepairable)."""
        return [a for a in self.anomalies if a.status in ("open", "unrepairable")]

    def carriers(self, version: int) -> list[str]:
        """The live files holding anomaly ``version``'s extra rows."""
        return sorted(p for p in self.live if version in self.carries.get(p, ()))

    def is_rewrite(self, version: int) -> bool:
        c = self.commits.get(version)
        return c is not None and not c.data_change


def _versions(text: str | None) -> set[int]:
    out: set[int] = set()
    for part in (text or "").split(","):
        part = part.strip()
        if part.isdigit():
            out.add(int(part))
    return out


def repair_copies(c: Commit) -> dict[str, str]:
    """{copy: original} of a repair commit (rows restored into new files)."""
    raw = c.metadata(REPAIR_COPIES)
    if not raw:
        return {}
    try:
        data = json.loads(raw)
    except ValueError:
        return {}
    return {str(k): str(v) for k, v in data.items()} if isinstance(data, Mapping) else {}


def analyse(commits: Iterable[Commit]) -> Lineage:
    """Replay ``commits`` (consecutive versions, oldest first) and find every anomaly (module docstring)."""
    with gc_paused():  # a dict entry per action of the window: nothing to collect, much to walk
        return _analyse(commits)


def _analyse(commits: Iterable[Commit], *, bulk_appends: bool = True) -> Lineage:
    """``bulk_appends``: an append (adds only, data changed, not a repair) is applied with whole-dict
    updates instead of add by add (``_append``); False replays every commit add by add (the reference
    the fuzzer compares it with, tests/fuzz/test_fuzz.py)."""
    live: dict[str, Mapping[str, Any]] = {}
    removed: dict[str, int] = {}
    consumed_by: dict[str, int] = {}
    produced_by: dict[str, int] = {}
    carries: dict[str, frozenset[int]] = {}
    last_add: dict[str, Mapping[str, Any]] = {}
    last_remove: dict[str, Mapping[str, Any]] = {}
    anomalies: dict[int, Anomaly] = {}
    tainted: dict[int, int] = {}
    live_removes_of: dict[int, tuple[str, ...]] = {}
    new_files: dict[int, tuple[str, ...]] = {}
    repaired_claims: dict[int, int] = {}  # anomaly -> the repair commit that names it
    table_changes: list[int] = []
    by_version: dict[int, Commit] = {}
    first = last = None
    for c in commits:
        first = c.version if first is None else first
        last = c.version
        if c.changes_table:
            table_changes.append(c.version)
        if not c.adds and not c.removes:
            continue
        v = c.version
        by_version[v] = c
        rewrite = not c.data_change
        names = _versions(c.metadata(REPAIR_OF))
        is_repair = bool(names) and rewrite
        if bulk_appends and not rewrite and not c.removes:
            _append(c, live, removed, produced_by, carries, last_add, live_removes_of, new_files)
            continue
        # classify the removes against the state before this commit
        live_removes = [p for p in c.removes if p in live or p not in removed]  # unseen: live before the window
        strays = {p: removed[p] for p in c.removes if p not in live and p in removed}
        readds = {p: removed[p] for p in c.adds if p in removed and p not in c.removes}
        inherited: set[int] = set()
        for p in live_removes:
            inherited |= carries.get(p, frozenset())
        anomaly: Anomaly | None = None
        if rewrite and strays and is_repair:
            # only what it brought back: re-adding a file that is live changes nothing (two repairs of
            # the same anomaly racing: the second removes nothing live and restores nothing new)
            back: dict[str, int | None] = {p: None for p in c.adds if p not in live}
            anomaly = Anomaly(v, "stale_repair", back) if back else None
        elif rewrite and strays and c.adds:
            anomaly = Anomaly(v, "double_remove", dict(strays))
        elif rewrite and readds and not is_repair:
            anomaly = Anomaly(v, "readd", dict(readds))
        if anomaly is not None:
            anomalies[v] = anomaly
            for p, earlier in anomaly.excess.items():
                first_remover = consumed_by.get(p)
                if earlier is not None and first_remover is not None and not by_version[first_remover].data_change:
                    continue
                if earlier is not None:
                    anomaly.status = "unrepairable"
                    anomaly.reason = (f"{p} had been removed by version {first_remover if first_remover is not None else earlier}, "
                                      "which changed data (DELETE/UPDATE/MERGE/RESTORE): rows that were deleted "
                                      "or changed are live again")
                    break
        if is_repair and not strays:
            for a in names:
                repaired_claims[a] = v
        # apply the removes
        for p, action in c.removes.items():
            if p in live or p not in removed:
                consumed_by[p] = v
            live.pop(p, None)
            removed[p] = v
            last_remove[p] = action
        live_removes_of[v] = tuple(live_removes)
        # what the added files hold: the rows of what this commit consumed (pooled over its adds)
        passed = frozenset(inherited - {a for a, r in repaired_claims.items() if r == v})
        fresh = tuple(p for p in c.adds if p not in live and p not in removed)
        new_files[v] = fresh
        if not rewrite and passed and fresh:
            for a in passed:  # an UPDATE/MERGE/DELETE rewrote files holding extra rows into new ones
                tainted.setdefault(a, v)
        copies = repair_copies(c) if is_repair else {}
        for p, action in c.adds.items():
            was_removed = p in removed and p not in c.removes
            live[p] = action
            removed.pop(p, None)
            produced_by[p] = v
            last_add[p] = action
            if was_removed and not rewrite:
                continue  # a RESTORE brings back the file's own content (and what it carried then)
            own = {anomaly.version} if anomaly is not None and p in _carriers_of(anomaly, c) else set()
            if is_repair:
                # a restored file holds its own rows; a copy holds its original's
                original = copies.get(p, p)
                _set(carries, p, (carries.get(original, frozenset()) - names) | own)
                continue
            _set(carries, p, passed | own | (carries.get(p, frozenset()) if was_removed else frozenset()))
        if is_repair and not strays:
            # compactor proved, from the files' contents, that this commit took out exactly the named
            # anomalies' extra rows (formats/delta/duplicates/repair.py): the live files that still name them hold no
            # extra row. The files it removed keep what they carry: a RESTORE to before the repair brings
            # the extra rows back with them.
            for p in [p for p, ids in carries.items() if ids & names and p in live]:
                _set(carries, p, carries[p] - names)
    lineage = Lineage(first, last, by_version, live, removed, consumed_by, produced_by, carries,
                      sorted(anomalies.values(), key=lambda a: a.version), last_add, last_remove, table_changes,
                      tainted, live_removes_of, new_files)
    _settle(lineage, repaired_claims)
    return lineage


def _append(c: Commit, live: dict[str, Mapping[str, Any]], removed: dict[str, int], produced_by: dict[str, int],
            carries: dict[str, frozenset[int]], last_add: dict[str, Mapping[str, Any]],
            live_removes_of: dict[int, tuple[str, ...]], new_files: dict[int, tuple[str, ...]]) -> None:
    """What the add-by-add replay does for a commit that only adds and changes data (an append, a
    RESTORE's re-adds), as whole-dict updates. Such a commit consumes nothing, so nothing passes to its
    files (``passed`` is empty) and it is no anomaly (every anomaly is a rewrite's); a file it brings back
    from ``removed`` keeps what it carried, every other file it adds carries nothing."""
    adds = c.adds
    back = [p for p in adds if p in removed]
    live_removes_of[c.version] = ()
    new_files[c.version] = tuple(p for p in adds if p not in live and p not in removed)
    live.update(adds)
    last_add.update(adds)
    produced_by.update(dict.fromkeys(adds, c.version))
    for p in back:
        del removed[p]
    if carries:
        kept = set(back)
        for p in adds:
            if p not in kept:
                carries.pop(p, None)


def _set(carries: dict[str, frozenset[int]], path: str, ids: set[int] | frozenset[int]) -> None:
    """Only files that carry something are kept (most files carry nothing)."""
    if ids:
        carries[path] = frozenset(ids)
    else:
        carries.pop(path, None)


def _carriers_of(a: Anomaly, c: Commit) -> frozenset[str]:
    """The files of commit ``c`` (the anomaly's own commit) that hold its extra rows."""
    if a.kind in ("readd", "stale_repair"):
        return frozenset(a.excess)
    return frozenset(c.adds)


def _settle(lineage: Lineage, repaired_claims: Mapping[int, int]) -> None:
    """The status of every anomaly at the end of the window."""
    for a in lineage.anomalies:
        carried = any(a.version in lineage.carries.get(p, ()) for p in lineage.live)
        if not carried:
            if a.status == "open" or a.status == "unrepairable":
                claim = repaired_claims.get(a.version)
                a.status, a.repaired_by = ("repaired", claim) if claim is not None else ("gone", None)
            continue
        if a.status == "open" and a.version in lineage.tainted:
            a.status = "unrepairable"
            a.reason = (f"version {lineage.tainted[a.version]} changed data (DELETE/UPDATE/MERGE) in files that hold "
                        "the duplicated rows: which rows are extra can no longer be told from the log")


def describe(a: Anomaly, lineage: Lineage, rows: Mapping[str, int | None] | None = None) -> DuplicateReport:
    """An anomaly as reported (plan ``duplicate_rewrite``, inspect, run results)."""
    n: int | None = None
    if rows is not None:
        counts = [rows.get(p) for p in a.excess]
        n = None if any(c is None for c in counts) else sum(c or 0 for c in counts)
    return DuplicateReport(kind=a.kind, later_version=a.version, earlier_versions=tuple(a.earlier_versions),
                           files=tuple(sorted(a.excess)), rows=n, status=a.status, repaired_by=a.repaired_by,
                           carriers=tuple(lineage.carriers(a.version)), repairable=a.status == "open",
                           reason=a.reason)
