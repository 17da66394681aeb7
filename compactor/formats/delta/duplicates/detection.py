"""Rows live twice in a Delta table, found from the log (the I/O around duplicates.py): the scan window,
its replay, and the repair to propose (repair_plan.py). The repair itself is repair.py.

The scan window: the JSON commits still in ``_delta_log``, at most ``horizon`` of them, ending at the
latest version. Every commit of the window is parsed and replayed (appends, RESTOREs, DELETE/UPDATE/
MERGE, rewrites, repairs): finding 1 of issue 18 came from skipping commits without a remove. Not
"since the last checkpoint": a checkpoint is written every 10 (delta-spark) or 100 (delta-rs) commits
whatever happens, so a duplicate often straddles one; log cleanup only deletes commits older than
``delta.logRetentionDuration`` (30 days), so the newest commits are always JSON. A path whose first action
in the window is a remove was live before it (duplicates.py); ``--horizon`` widens the window.
"""

from __future__ import annotations

import logging
import re
from collections import deque
from collections.abc import Generator, Mapping
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass, replace
from itertools import islice

from compactor.formats.delta.duplicates.lineage import Lineage, analyse, describe
from compactor.formats.delta.duplicates.repair_plan import RepairProposal, propose
from compactor.formats.delta.read.log import Commit, commits_after, num_records, parse_commit, read_commit_text
from compactor.models.duplicates import DuplicateReport, LogWindow
from compactor.models.table import TableLocation
from compactor.runtime.paths import filesystem, join
from compactor.runtime.storage import storage_for

log = logging.getLogger(__name__)

#: how many of the newest commits a scan reads at most
DEFAULT_HORIZON = 1000
_READERS = 16


# ----------------------------------------------------------------------------- reading the window


def _texts_in_order(table: TableLocation, versions: list[int]) -> Generator[tuple[int, str | None], None, None]:
    """The raw commits of ``versions`` (None: not there) in that order, fetched ``_READERS`` at a time
    with at most twice that many in flight (fetched ahead, not held: a caller that drops what it has read
    never holds a window of large commits whole)."""
    pool = ThreadPoolExecutor(max_workers=_READERS, thread_name_prefix="delta-log")
    try:
        ahead: deque[tuple[int, Future[str | None]]] = deque()
        todo = iter(versions)
        for v in islice(todo, 2 * _READERS):
            ahead.append((v, pool.submit(read_commit_text, table, v)))
        while ahead:
            v, fetched = ahead.popleft()
            text = fetched.result()
            for nxt in islice(todo, 1):
                ahead.append((nxt, pool.submit(read_commit_text, table, nxt)))
            yield v, text
    finally:
        pool.shutdown(wait=True, cancel_futures=True)


def _read_texts(table: TableLocation, versions: list[int]) -> dict[int, str | None]:
    """The raw commits of ``versions`` (None: not there), by version."""
    return dict(_texts_in_order(table, versions))


def _read_commits(table: TableLocation, versions: list[int],
                  known: Mapping[int, Commit] | None = None) -> list[Commit | None]:
    """The commits of ``versions`` (None: not there), fetched ``_READERS`` at a time and parsed in this
    thread (parsing holds the GIL: parsing threads would only contend); ``known``: commits already
    parsed, by version."""
    known = known or {}
    texts = _read_texts(table, [v for v in versions if v not in known])
    out: list[Commit | None] = []
    for v in versions:
        text = texts.get(v)
        out.append(known[v] if v in known else None if text is None else parse_commit(v, text))
    return out


#: a ``dataChange`` key whose value is not ``true``: how an add or remove says it changes no data
_NOT_DATA_CHANGE = re.compile(r'"dataChange"\s*:\s*(?!\s|true)')  # (?!\s: no backtracking into spaces


def may_rewrite(text: str) -> bool:
    """Whether a commit may be a rewrite, read from its raw text: every anomaly is a commit whose adds and
    removes all say ``dataChange`` is false (duplicates.py), and an add or remove without the key changes
    data. Conservative: True wherever a ``dataChange`` key (unescaped: a quote inside a JSON string is
    escaped) has any value but ``true`` (null and 0 read as false too), and wherever a ``\\u`` escape
    could spell the key otherwise."""
    return "\\u" in text or _NOT_DATA_CHANGE.search(text) is not None


@dataclass(frozen=True)
class NewestWindow:
    """The scan window ending at the newest commit listed in ``_delta_log`` (``newest_window``)."""

    version: int
    #: its commits, parsed, by version; None when none of them may be a rewrite (nothing to replay: the
    #: window holds no anomaly)
    commits: dict[int, Commit] | None


def newest_window(table: TableLocation, *, horizon: int = DEFAULT_HORIZON) -> NewestWindow | None:
    """The window ``read_window`` reads up to the newest commit listed now: planning reads it while
    delta-rs loads the table's state (it releases the GIL) and replays it there when the state is at that
    version (a commit never changes once written). Read newest first; a commit that cannot be a rewrite
    (``may_rewrite``) is dropped once scanned until one that may be is found, so a window of appends,
    DELETEs and MERGEs, which can hold no anomaly, is never held or parsed whole. Once one commit may be a
    rewrite, the whole window is parsed (the dropped newer commits read again). None when the log cannot
    be listed or read: the window is then read as usual, and reports any error itself."""
    try:
        found, _ = storage_for(table.uri, table.storage_options).list_dir("_delta_log")
        listed = [int(n[:20]) for n in (o.path.rsplit("/", 1)[-1] for o in found)
                  if len(n) == 25 and n.endswith(".json") and n[:20].isdigit()]
        if not listed:
            return None
        newest = max(listed)
        versions = list(range(newest, max(0, newest - max(1, horizon) + 1) - 1, -1))
        kept: dict[int, str] = {}
        dropped: list[int] = []
        texts = _texts_in_order(table, versions)
        try:
            for v, text in texts:
                if text is None:  # the run ends at a commit that is not there (cleaned up)
                    break
                if kept or may_rewrite(text):
                    kept[v] = text
                else:
                    dropped.append(v)
        finally:
            texts.close()
        if not kept:
            return NewestWindow(newest, None)
        for v, text in _read_texts(table, dropped).items():  # newer than what is kept: not cleaned up before it
            if text is None:
                return None
            kept[v] = text
    except Exception as e:  # noqa: BLE001 - only a head start: the window is read as usual without it
        log.debug("%s: no head start on the log scan: %s", table.uri, e)
        return None
    return NewestWindow(newest, {v: parse_commit(v, text) for v, text in sorted(kept.items())})


def read_window(table: TableLocation, *, until: int, start: int | None = None,
                horizon: int = DEFAULT_HORIZON, known: Mapping[int, Commit] | None = None) -> list[Commit]:
    """The consecutive JSON commits ``max(start, until - horizon + 1) .. until`` that still exist (the
    oldest ones may have been cleaned up), oldest first, every action parsed. ``known``: commits already
    parsed (``newest_window``), by version."""
    lo = max(0, until - max(1, horizon) + 1)
    if start is not None:
        lo = max(lo, start)
    got = _read_commits(table, list(range(lo, until + 1)), known)
    out: list[Commit] = []
    for c in reversed(got):  # the contiguous run ending at ``until``
        if c is None:
            break
        out.append(c)
    return out[::-1]


def log_rows(lineage: Lineage, paths: set[str]) -> dict[str, int | None]:
    return {p: num_records(lineage.last_add.get(p)) for p in sorted(paths)}


def _footer_rows(table: TableLocation, path: str) -> int | None:
    """Rows from the parquet footer (a file added before the window: its add, with numRecords, is not in
    the window); None when the file is gone."""
    import pyarrow.parquet as pq

    fs, p = filesystem(join(table.uri, path), table.storage_options)
    try:
        return int(pq.ParquetFile(p, filesystem=fs).metadata.num_rows)
    except OSError:
        return None


def file_exists(table: TableLocation, path: str) -> bool:
    import pyarrow.fs as pafs

    fs, p = filesystem(join(table.uri, path), table.storage_options)
    try:
        return bool(fs.get_file_info(p).type == pafs.FileType.File)
    except OSError:
        return False


# ----------------------------------------------------------------------------- detection


@dataclass
class Detection:
    """What ``detect`` found in one log window: the replayed lineage, the repair it proposes, and rows by path."""

    uri: str
    version: int | None
    first_version: int | None
    lineage: Lineage
    #: the repair of every open anomaly (None: nothing open)
    proposal: RepairProposal | None
    rows: dict[str, int | None]

    @property
    def open(self) -> list[DuplicateReport]:
        return [describe(a, self.lineage, self.rows) for a in self.lineage.open]

    @property
    def current(self) -> list[DuplicateReport]:
        """Rows live twice now: open and unrepairable anomalies."""
        return [describe(a, self.lineage, self.rows) for a in self.lineage.current]

    @property
    def history(self) -> list[DuplicateReport]:
        """Every anomaly found in the window, including those repaired since."""
        return [describe(a, self.lineage, self.rows) for a in self.lineage.anomalies]

    @property
    def carriers(self) -> list[str]:
        return sorted({p for a in self.lineage.current for p in self.lineage.carriers(a.version)})

    @property
    def problems(self) -> list[str]:
        """Why the rows live twice cannot be repaired automatically (empty: they can, or none do)."""
        out = [f"version {a.version}: {a.reason}" for a in self.lineage.unrepairable]
        return out + list(self.proposal.problems if self.proposal is not None else ())

    def window(self) -> LogWindow:
        return LogWindow(self.first_version, self.version)


def _latest_version(table: TableLocation) -> int:
    from deltalake import DeltaTable

    return int(DeltaTable(table.uri, storage_options=dict(table.storage_options or {}) or None,
                          without_files=True).version())


def detect(table: TableLocation, *, version: int | None = None, start: int | None = None,
           horizon: int = DEFAULT_HORIZON, known: Mapping[int, Commit] | None = None) -> Detection:
    """Rows live twice in the window ending at ``version`` (default: the latest commit), and their repair.
    ``known``: commits already parsed, by version (``newest_window``)."""
    if version is None:
        version = _latest_version(table)
    commits = read_window(table, until=version, start=start, horizon=horizon, known=known)
    lineage = analyse(commits)
    proposal = propose(lineage)
    paths = {p for a in lineage.anomalies for p in a.excess}
    if proposal is not None:
        paths |= {*proposal.remove, *proposal.restore}
    if proposal is not None and proposal.repairable:
        # a repair proves itself on the files: one VACUUM deleted is refused now, in the plan
        needed = sorted({*proposal.remove, *proposal.restore, *(p for _, p in proposal.excess), *proposal.keep})
        gone = [p for p in needed if not file_exists(table, p)]
        if gone:
            proposal = replace(proposal, problems=(
                f"{len(gone)} file(s) the repair must read are gone from storage (vacuumed?), e.g. {gone[0]}: "
                "which rows are extra cannot be proved",))
    rows = log_rows(lineage, paths)
    for p in [p for p, n in rows.items() if n is None]:
        rows[p] = _footer_rows(table, p)
    return Detection(table.uri, version, commits[0].version if commits else None, lineage, proposal, rows)


def removals_after(table: TableLocation, version: int) -> tuple[int, dict[str, list[int]]]:
    """(last version read, {path: versions that removed it}) for the commits after ``version``: the watch
    polls with this."""
    last = version
    found: dict[str, list[int]] = {}
    for c in commits_after(table, version):
        last = c.version
        for p in c.removes:
            found.setdefault(p, []).append(c.version)
    return last, found
