"""Repair rows that live twice in a Delta table (found by detection.py; the repair as data is
repair_plan.py, its proof on the files' contents repair_content.py).

A repair commits only after it has proved, from the files' contents, that it takes out exactly one extra
copy of each duplicated row and nothing else (repair_content.py), and it never re-adds a file VACUUM may
already delete: a file whose tombstone is older than the table's deleted-file retention minus a margin
is restored as a byte copy under a new name instead (docs/safety.md).
"""

from __future__ import annotations

import json
import logging
import posixpath
import uuid
from collections.abc import Callable, Mapping, Sequence
from typing import Any

from compactor.errors import ApplyError, StalePlanError, VerificationError
from compactor.formats.delta.apply.commit import MARKER, commit_properties, find_commit
from compactor.formats.delta.apply.log_writer import writes_directly
from compactor.formats.delta.duplicates.detection import (  # noqa: F401 - the names callers import from here
    DEFAULT_HORIZON,
    Detection,
    detect,
    file_exists,
    log_rows,
    removals_after,
)
from compactor.formats.delta.duplicates.lineage import REPAIR_COPIES, REPAIR_OF, Lineage
from compactor.formats.delta.duplicates.repair_content import ContentCheck, excess_live_before
from compactor.formats.delta.duplicates.repair_plan import RepairProposal
from compactor.formats.delta.duplicates.repair_result import RepairResult
from compactor.formats.delta.plan.retention import DELETED, parse_interval
from compactor.formats.delta.plan.support import COMPACTOR_WRITES, DELTA_RS_UNWRITABLE, NATIVE_ONLY
from compactor.formats.delta.read.deletion_vectors import DescriptorJson, descriptor
from compactor.formats.delta.read.log import commits_after
from compactor.formats.delta.read.log_paths import spelled_otherwise
from compactor.models.table import TableLocation
from compactor.runtime import clock
from compactor.runtime.faults import crash_point
from compactor.runtime.paths import filesystem, join

log = logging.getLogger(__name__)

#: Delta's default delta.deletedFileRetentionDuration
DEFAULT_DELETED_RETENTION_S = 7 * 24 * 3600


# ----------------------------------------------------------------------------- repair


class RepairError(ApplyError):
    """Rows live twice and compactor will not repair them automatically."""


def _reader(table: TableLocation) -> Callable[[str], Any]:
    import pyarrow.parquet as pq

    def read(path: str) -> Any:
        fs, p = filesystem(join(table.uri, path), table.storage_options)
        with fs.open_input_file(p) as f:  # the file alone: no partition inferred from its folder
            return pq.ParquetFile(f).read()

    return read


def _partition_values(lineage: Lineage, path: str) -> Mapping[str, str | None] | None:
    for action in (lineage.last_add.get(path), lineage.last_remove.get(path)):
        if action is not None and action.get("partitionValues") is not None:
            return dict(action["partitionValues"])
    return None


def retention_s(properties: Mapping[str, str | None]) -> int:
    return parse_interval(properties.get(DELETED)) or DEFAULT_DELETED_RETENTION_S


def readd_horizon_s(retention: int) -> int:
    """A tombstone younger than this may be re-added: VACUUM (anyone's, with the table's retention)
    deletes files whose tombstone is older than the retention, so keep a margin of a quarter of it and
    at least a day (runs that take long, clocks that differ)."""
    return max(0, retention - max(24 * 3600, retention // 4))


def _must_copy(lineage: Lineage, proposal: RepairProposal, now_ms: int, retention: int) -> list[str]:
    """Restored files whose tombstone is too old to re-add (or unknown): copied under a new name."""
    horizon_ms = readd_horizon_s(retention) * 1000
    out = []
    for p in proposal.restore:
        ts = (lineage.last_remove.get(p) or {}).get("deletionTimestamp")
        if not isinstance(ts, int) or now_ms - ts >= horizon_ms:
            out.append(p)
    return out


def _copy_name(path: str) -> str:
    d = posixpath.dirname(path)
    name = f"part-{uuid.uuid4()}-compactor-repair.c000.snappy.parquet"
    return f"{d}/{name}" if d else name


def _copy(table: TableLocation, src: str, dst: str) -> int:
    fs, s = filesystem(join(table.uri, src), table.storage_options)
    _, d = filesystem(join(table.uri, dst), table.storage_options)
    fs.copy_file(s, d)
    return int(fs.get_file_info(d).size)


def _check(table: TableLocation, dt: Any, lineage: Lineage, proposal: RepairProposal) -> None:
    """Everything that must hold before a repair may commit (raises RepairError / VerificationError)."""
    uri = table.uri
    if not proposal.repairable:
        raise RepairError(f"{uri}: rows live twice and compactor will not repair them automatically: "
                          f"{'; '.join(proposal.problems)}",
                          hint="restore the table to the version before the duplicate (RESTORE) or deduplicate "
                               "by hand")
    features = set(dt.protocol().writer_features or ())
    unwritable = sorted(features & NATIVE_ONLY.keys() | features - COMPACTOR_WRITES
                        | (features & DELTA_RS_UNWRITABLE if not writes_directly(dt, table) else set()))
    if unwritable:
        raise RepairError(f"{uri}: compactor cannot commit the repair to a table with writer feature(s) "
                          f"{', '.join(unwritable)}", hint="restore the table to the version before the duplicate")
    touched = [*proposal.remove, *proposal.restore, *(p for _, p in proposal.excess), *proposal.keep]
    with_dv = [p for p in touched if (lineage.last_add.get(p) or {}).get("deletionVector")
               or (lineage.last_remove.get(p) or {}).get("deletionVector")]
    if with_dv:  # the rows of a file with a deletion vector are not the rows in its parquet file
        raise RepairError(f"{uri}: the repair depends on {len(with_dv)} file(s) with deletion vectors (e.g. "
                          f"{with_dv[0]}), whose rows compactor cannot prove", hint="restore the table to the "
                          "version before the duplicate (RESTORE)")
    no_pv = [p for p in proposal.restore if _partition_values(lineage, p) is None]
    if no_pv:
        raise RepairError(f"{uri}: cannot restore {no_pv[0]}: its partition values are not in the log window",
                          hint="widen the window with --horizon")
    missing = sorted({p for p in touched if not file_exists(table, p)})
    if missing:
        raise RepairError(f"{uri}: {len(missing)} file(s) the repair must read are gone from storage "
                          f"(vacuumed?), e.g. {missing[0]}: its rows cannot be proved", hint="deduplicate by hand")
    repairs = [v for v in proposal.anomalies if (lineage.commits[v].metadata(REPAIR_OF) or "")]
    problem = excess_live_before(proposal, lambda v: _live_at(table, v), repairs)
    if problem is None:
        parts = {p: _partition_values(lineage, p) or {} for p in touched}
        problem = ContentCheck(_reader(table), parts).problem(proposal)
    if problem:
        raise VerificationError(f"{uri}: {problem}; nothing was committed")


def _live_at(table: TableLocation, version: int) -> set[str]:
    import pyarrow as pa
    from deltalake import DeltaTable

    from compactor.formats.delta.read.state import _logical_paths

    old = DeltaTable(table.uri, storage_options=dict(table.storage_options or {}) or None, version=version)
    col = pa.chunked_array(old.get_add_actions(flatten=True).column("path"))
    return set(_logical_paths(col)[0].to_pylist()) if len(col) else set()


def _touched_since(table: TableLocation, version: int, proposal: RepairProposal) -> int | None:
    """The first commit after ``version`` that removed a file the repair removes, added or removed a file
    it restores, or changed the schema or protocol: the repair was proved on a view that is gone."""
    removes, restores = set(proposal.remove), set(proposal.restore)
    for c in commits_after(table, version):
        if removes & set(c.removes) or restores & (set(c.removes) | set(c.adds)) or c.changes_table:
            return c.version
    return None


def _row_totals(lineage: Lineage, proposal: RepairProposal) -> tuple[int, int]:
    rows = log_rows(lineage, {*proposal.remove, *proposal.restore})
    return (sum(rows[p] or 0 for p in proposal.remove), sum(rows[p] or 0 for p in proposal.restore))


def execute(table: TableLocation, detection: Detection, *,
            commit_metadata: Mapping[str, str] | None = None, fence: Callable[[], None] | None = None,
            dry_run: bool = False) -> RepairResult:
    """Prove ``detection.proposal`` on the files and commit it (one dataChange=false commit)."""
    from deltalake import DeltaTable
    from deltalake.transaction import AddAction, RemoveAction

    from compactor.formats.delta.apply.stats import footer_stats

    uri = table.uri
    so = dict(table.storage_options or {}) or None
    result = RepairResult(uri, "clean", window=detection.window(), version_before=detection.version,
                          version_after=detection.version)
    proposal, lineage = detection.proposal, detection.lineage
    if proposal is None:
        if detection.problems:
            raise RepairError(f"{uri}: rows live twice and compactor will not repair them automatically: "
                              f"{'; '.join(detection.problems)}", hint="restore the table to a version before the "
                              "duplicate (RESTORE) or deduplicate by hand")
        return result
    dt = DeltaTable(uri, storage_options=so, version=detection.version)
    _check(table, dt, lineage, proposal)
    now_ms = int(clock.wall() * 1000)
    copies = _must_copy(lineage, proposal, now_ms, retention_s(dict(dt.metadata().configuration)))
    result.duplicates = detection.open
    result.proposal = proposal
    result.files_removed, result.files_restored, result.files_copied = (
        len(proposal.remove), len(proposal.restore), len(copies))
    result.rows_removed, result.rows_restored = _row_totals(lineage, proposal)
    if dry_run:
        result.status = "would_repair"
        return result
    if _touched_since(table, int(detection.version or 0), proposal) is not None:
        raise StalePlanError(f"{uri}: the table changed where the repair works since it was proved",
                             hint="re-run `compactor plan` (or `compactor repair`)")
    actions: list[Any] = []
    for p in proposal.remove:
        add = lineage.last_add.get(p) or {}
        actions.append(RemoveAction(p, False, now_ms, int(add.get("size") or 0), dict(_partition_values(lineage, p) or {})))
    copy_of: dict[str, str] = {}
    for p in proposal.restore:
        last = lineage.last_add.get(p) or {}
        stats = last.get("stats")
        if not isinstance(stats, str) or not stats:
            fs, fp = filesystem(join(uri, p), table.storage_options)
            _, stats = footer_stats(fp, fs)
        path, size = p, int(last.get("size") or (lineage.last_remove.get(p) or {}).get("size") or 0)
        if p in copies:
            path = _copy_name(p)
            size = _copy(table, p, path)
            copy_of[path] = p
        actions.append(AddAction(path, size, dict(_partition_values(lineage, p) or {}), now_ms, False, stats))
    meta = dict(commit_metadata or {})
    marker = f"{meta.get(MARKER) or 'repair'}:repair:{uuid.uuid4().hex[:8]}"
    cm = {**meta, MARKER: marker, REPAIR_OF: ",".join(map(str, proposal.anomalies)),
          "compactor.repair_chain": ",".join(map(str, proposal.chain)),
          **({REPAIR_COPIES: json.dumps(copy_of, sort_keys=True)} if copy_of else {})}
    missing = [a.path for a in actions if isinstance(a, AddAction) and not file_exists(table, a.path)]
    if missing:
        raise ApplyError(f"{uri}: {missing[0]}, which the repair adds, is not on storage; nothing was committed")
    if fence is not None:
        fence()
    crash_point("delta.repair_before_commit")

    # a file removed or restored keeps its deletion vector (its remove matches its add only with it; a
    # restore without it would bring its deleted rows back); a copy holds the same rows at the same positions
    vectors = {p: _vector(lineage.last_add.get(p)) for p in (*proposal.remove, *proposal.restore)}
    vectors.update({copy: vectors.get(p) for copy, p in copy_of.items()})
    # a remove spells its path as the log spelled the add (Spark writes non-ASCII characters raw), or it
    # retires nothing
    spellings = {p: raw for p in proposal.remove
                 if isinstance(raw := (lineage.last_add.get(p) or {}).get("path"), str) and spelled_otherwise(p, raw)}

    def through_delta_rs() -> None:
        if spellings:  # delta-rs' RemoveAction is spelled by delta-rs' own encoding
            raise RepairError(f"{uri}: the repair would remove files whose log path delta-rs spells otherwise (e.g. "
                              f"{sorted(spellings)[0]}), and compactor cannot write this table's commits itself; "
                              "nothing was committed", hint="restore the table to a version before the duplicate (RESTORE)")
        if any(vectors.values()):  # delta-rs' Add/RemoveAction cannot carry a deletion vector
            raise RepairError(f"{uri}: the repair would remove or restore files with deletion vectors, and compactor "
                              "cannot write this table's commits itself; nothing was committed",
                              hint="restore the table to a version before the duplicate (RESTORE)")
        dt.create_write_transaction(actions, mode="append", schema=dt.schema(),
                                    partition_by=list(dt.metadata().partition_columns),
                                    commit_properties=commit_properties(cm))

    _commit(dt, table, int(detection.version or 0), actions, proposal, result.rows_deduplicated, now_ms, cm,
            through_delta_rs, vectors, spellings)
    crash_point("delta.repair_after_commit")
    own = find_commit(table, int(detection.version or 0), marker)
    if own is None:
        raise ApplyError(f"{uri}: the repair committed but its commit (marker {marker}) is not in the log")
    still = _still_live(table, proposal.remove)
    if still:
        raise VerificationError(f"{uri}: the repair's commit {own.version} left {len(still)} file(s) it removes live "
                                f"(e.g. {still[0]}): a remove did not name its add, and rows stay live twice",
                                hint="restore the table to the version before the duplicate (RESTORE)")
    log.warning("%s: repaired rows live twice (versions %s) in version %d: %d file(s) removed, %d restored "
                "(%d copied), %d duplicated row(s) gone", uri, list(proposal.anomalies), own.version,
                len(proposal.remove), len(proposal.restore), len(copies), result.rows_deduplicated)
    result.status = "repaired"
    result.commits.append(own.version)
    result.version_after = own.version
    return result


def _still_live(table: TableLocation, removed: Sequence[str]) -> list[str]:
    """Those of ``removed`` a reader still holds live after the repair's commit, as delta-rs reads the log (it
    keys a file by its path as spelled, as delta-spark does: a remove spelled otherwise than its add retires
    nothing; compactor's own replay keys decoded paths and would not tell)."""
    from compactor.errors import TableReadError
    from compactor.formats.delta.read.state import read_delta_state

    try:
        live = set(read_delta_state(table).files.column("path").to_pylist())
    except TableReadError as e:  # delta-rs cannot read every table (a v2 checkpoint's reader feature, for one)
        log.warning("%s: the repair's removes could not be checked against delta-rs' reading: %s", table.uri, e)
        return []
    return sorted(p for p in removed if p in live)


def _vector(add: Mapping[str, Any] | None) -> DescriptorJson | None:
    """The deletion vector descriptor an add action carries, or None."""
    dv = (add or {}).get("deletionVector")
    return descriptor(dv) if dv else None


def _commit(dt: Any, table: TableLocation, read_version: int, actions: list[Any], proposal: RepairProposal,
            extra_rows: int | None, now_ms: int, metadata: Mapping[str, str], fallback: Callable[[], None],
            vectors: Mapping[str, DescriptorJson | None], spellings: Mapping[str, str]) -> None:
    """The repair's one dataChange=false commit, recorded as compactor's repair (formats/delta/apply/log_writer.py);
    ``spellings``: the removes' paths as the log spelled their adds, where delta-rs' encoding differs."""
    from deltalake.transaction import AddAction

    from compactor.formats.delta.apply.log_writer import add_action, remove_action, repair, write_commit

    removes = [a for a in actions if not isinstance(a, AddAction)]
    adds = [a for a in actions if isinstance(a, AddAction)]
    write_commit(dt, table, read_version,
                 [*(remove_action(a.path, a.size or 0, a.partition_values or {}, now_ms, vectors.get(a.path),
                                  spelled=spellings.get(a.path)) for a in removes),
                  *(add_action(a.path, a.size, a.partition_values, a.stats, now_ms, vectors.get(a.path)) for a in adds)],
                 repair([a.size or 0 for a in removes], [a.size for a in adds], versions=list(proposal.anomalies),
                        extra_rows=extra_rows),
                 metadata, fallback=fallback)


def repair(table: TableLocation, *, start: int | None = None, horizon: int = DEFAULT_HORIZON,
           commit_metadata: Mapping[str, str] | None = None, dry_run: bool = False,
           fence: Callable[[], None] | None = None, expected: RepairProposal | None = None) -> RepairResult:
    """Detect and repair the rows live twice in the window. ``expected``: the reviewed repair (a plan's
    repair action): the one derived now must be the same, or nothing is committed (StalePlanError)."""
    found = detect(table, start=start, horizon=horizon)
    if expected is not None and not same_repair(found.proposal, expected):
        raise StalePlanError(f"{table.uri}: the repair derived from the log now differs from the planned one (the "
                             "table changed since planning)", hint="re-run `compactor plan`")
    return execute(table, found, commit_metadata=commit_metadata, fence=fence, dry_run=dry_run)


def same_repair(a: RepairProposal | None, b: RepairProposal | None) -> bool:
    if a is None or b is None:
        return a is b
    return (a.anomalies, set(a.remove), set(a.restore)) == (b.anomalies, set(b.remove), set(b.restore))
