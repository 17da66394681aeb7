"""The one adapter pinned to pyiceberg's private API (0.12.0, asserted at import): commit rewritten bins as
one ``replace`` snapshot that removes exactly the bins' input data files and adds exactly their outputs,
validated against the snapshot the bins were planned (and read) at.

pyiceberg has no ``replace`` operation: ``_ReplaceFiles`` is its overwrite producer (delete these data files,
add those) whose summary says ``replace`` and whose concurrency check is compactor's own (``stale_problems``):

- the planned snapshot is the current snapshot or one of its ancestors (not rolled back, not replaced);
- every removed file is still live, and the delete files that apply to it are exactly those that applied at
  the planned snapshot (a delete, update or merge since then makes the bins stale: the outputs hold rows
  the table no longer has, or lack nothing they should);
- no equality delete applies to a removed file; the table is still format version 1 or 2; the current
  partition spec is still the one the outputs were written in; every output exists;
- no delete file would stay live that only removed files referenced (pyiceberg cannot remove delete files).

Files appended since the planned snapshot are untouched (they are in neither set). The check runs right
before the commit and again on each of pyiceberg's retries after a concurrent commit (against the refreshed
table, from the planned snapshot); the catalog's ref assertion makes the commit land only on the snapshot
checked last. A stale or refused commit raises and commits nothing; pyiceberg deletes the manifests it
wrote, the caller the outputs (rewrite.discard). Added files get the new snapshot's sequence number, so the
position deletes that applied to the inputs (already applied in the outputs) do not apply to them."""

from __future__ import annotations

from collections.abc import Collection, Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING

import pyiceberg

from compactor.errors import ApplyError, CompactorError, StalePlanError
from compactor.formats.iceberg.live import LiveFiles, read_live, stranded_deletes
from compactor.formats.iceberg.support import MAX_FORMAT_VERSION, LocalEngineRefusal, stranded_problem

if TYPE_CHECKING:
    from pyiceberg.manifest import DataFile
    from pyiceberg.table import Table
    from pyiceberg.table.metadata import TableMetadata
    from pyiceberg.table.snapshots import Summary

    from compactor.formats.iceberg.rewrite import RewrittenBin
    from compactor.formats.iceberg.state import IcebergState

#: the pyiceberg version this module's private-API use is tested with
PINNED_PYICEBERG = "0.12.0"


class PyicebergVersionError(CompactorError):
    code = "iceberg_version"


if pyiceberg.__version__ != PINNED_PYICEBERG:
    raise PyicebergVersionError(
        f"compactor commits Iceberg rewrites through pyiceberg {PINNED_PYICEBERG}'s private snapshot producer, "
        f"but pyiceberg {pyiceberg.__version__} is installed",
        hint=f"pip install 'pyiceberg[pyarrow,sql-sqlite,pyiceberg-core]=={PINNED_PYICEBERG}' "
             "(or pip install 'compactor[iceberg]')")

from pyiceberg.exceptions import CommitFailedException, CommitStateUnknownException, ValidationException  # noqa: E402
from pyiceberg.table.snapshots import Operation, ancestors_of  # noqa: E402
from pyiceberg.table.snapshots import Summary as _Summary  # noqa: E402
from pyiceberg.table.update.snapshot import _OverwriteFiles  # noqa: E402
from pyiceberg.typedef import EMPTY_DICT  # noqa: E402


class StaleReplaceError(StalePlanError):
    """The table changed since the planned snapshot in a way that touches the bins: nothing was committed."""


class CommitOutcomeUnknown(ApplyError):
    """The catalog did not say whether the commit landed: the outputs must stay (they may be live)."""

    code = "commit_unknown"


@dataclass(frozen=True)
class ReplaceResult:
    """A committed replace: the new snapshot and exactly what it replaced."""

    snapshot_id: int
    parent_id: int | None
    planned_snapshot_id: int
    removed: tuple[str, ...]
    added: tuple[str, ...]
    rows_removed: int
    rows_added: int


def _history_problem(md: TableMetadata, planned: IcebergState) -> str | None:
    """Why the table's current history no longer holds the planned snapshot (rolled back, replaced, or
    planned on a table without snapshots); None when it does."""
    if planned.snapshot_id is None:
        return "the plan was made on a table without snapshots"
    head = md.current_snapshot()
    if head is None or all(s.snapshot_id != planned.snapshot_id for s in ancestors_of(head, md)):
        return (f"the planned snapshot {planned.snapshot_id} is no longer in the table's current history "
                f"(current: {head.snapshot_id if head else None}): the table was rolled back or replaced")
    return None


def stale_problems(table: Table, planned: IcebergState, removed: Sequence[str], added: Sequence[DataFile]) -> list[str]:
    """Why committing ``removed`` -> ``added`` to ``table`` as it is now (planned at ``planned``) would not be
    the reviewed rewrite; empty when it is."""
    md = table.metadata
    gone = _history_problem(md, planned)
    if gone is not None:
        return [gone]
    head = md.current_snapshot()
    assert head is not None  # it holds the planned snapshot in its history
    problems: list[str] = []
    if md.format_version > MAX_FORMAT_VERSION:
        problems.append(f"the table is now format version {md.format_version}")
    spec_ids = {int(f.spec_id or 0) for f in added}
    if spec_ids - {md.default_spec_id}:
        problems.append(f"the table's current partition spec is now {md.default_spec_id}, not the spec "
                        f"{sorted(spec_ids)} the outputs were written in")
    if head.snapshot_id == planned.snapshot_id:
        live = planned.live
    else:
        live = read_live(md, table.io, head.snapshot_id, planned.identifier)
        problems += _changed(planned.live, live, removed, head.snapshot_id)
    for path in removed:
        data = live.data.get(path)
        if data is not None and data.equality_deletes:
            problems.append(f"equality deletes apply to {path}")
    stranded = stranded_problem(stranded_deletes(live, table.io, set(removed)))
    if stranded:
        problems.append(stranded)
    return problems


def stale_by_group(table: Table, planned: IcebergState, groups: Sequence[Sequence[str]]) -> list[list[str]]:
    """Per group of files to replace (an action's), why replacing them now would not be the reviewed
    rewrite, for the spark engine's commit (Iceberg's own: it writes every format version, applies
    equality deletes and removes the delete files only the replaced files referenced, so only the table's
    history and the files' deletes are checked), reading the table's head once."""
    md = table.metadata
    gone = _history_problem(md, planned)
    if gone is not None:
        return [[gone] for _ in groups]
    head = md.current_snapshot()
    assert head is not None  # it holds the planned snapshot in its history
    if head.snapshot_id == planned.snapshot_id:
        return [[] for _ in groups]
    live = read_live(md, table.io, head.snapshot_id, planned.identifier)
    return [_changed(planned.live, live, removed, head.snapshot_id) for removed in groups]


def stale_actions(table: Table, planned: IcebergState, groups: Sequence[Sequence[str]],
                  skip: Collection[int] = ()) -> dict[int, StaleReplaceError]:
    """``stale_by_group`` as the error of each stale group (by index; those in ``skip`` aside): the actions
    a commit group leaves out (the local engine's commit then validates the rest again: ``replace``)."""
    return {i: StaleReplaceError(f"{planned.identifier}: not committed, the plan is stale: {'; '.join(p)}",
                                 hint="plan again")
            for i, p in enumerate(stale_by_group(table, planned, groups)) if p and i not in skip}


def _changed(planned: LiveFiles, head: LiveFiles, removed: Sequence[str], head_id: int) -> list[str]:
    gone = [p for p in removed if p not in head.data]
    problems = []
    if gone:
        problems.append(f"{len(gone)} of the files to replace are no longer live at snapshot {head_id} (deleted, "
                        f"overwritten or compacted by another writer since the planned snapshot), e.g. {gone[0]}")
    touched = []
    for path in removed:
        now, then = head.data.get(path), planned.data.get(path)
        if now is None or then is None:
            continue
        if {str(d.file_path) for d in now.deletes} != {str(d.file_path) for d in then.deletes}:
            touched.append(path)
    if touched:
        problems.append(f"the delete files that apply to {len(touched)} of the files to replace changed since the "
                        f"planned snapshot (a delete, update or merge), e.g. {touched[0]}")
    return problems


class _Stale(ValidationException):
    """Raised inside pyiceberg's commit (its retries): pyiceberg then deletes what it wrote and re-raises."""

    def __init__(self, problems: list[str]) -> None:
        super().__init__("; ".join(problems))
        self.problems = problems


class _ReplaceFiles(_OverwriteFiles):
    """pyiceberg's overwrite producer committing a ``replace`` snapshot, checked by ``stale_problems``."""

    def __init__(self, table: Table, planned: IcebergState, removed: Sequence[str], added: Sequence[DataFile],
                 properties: Mapping[str, str]) -> None:
        txn = table.transaction()
        super().__init__(operation=Operation.OVERWRITE, transaction=txn, io=table.io,
                         snapshot_properties=dict(properties))
        # pyiceberg's retries check the commits from here on (compactor's check reads from the planned one)
        self._starting_snapshot_id = planned.snapshot_id
        self._planned, self._removed, self._added = planned, tuple(removed), tuple(added)

    def _summary(self, snapshot_properties: dict[str, str] = EMPTY_DICT) -> Summary:
        summary = super()._summary(snapshot_properties)
        return _Summary(Operation.REPLACE, **summary.additional_properties)

    def _validate_concurrency(self) -> None:
        problems = stale_problems(self._transaction._table, self._planned, self._removed, self._added)
        if problems:
            raise _Stale(problems)


def _missing_outputs(table: Table, added: Sequence[DataFile]) -> list[str]:
    return [str(f.file_path) for f in added if not table.io.new_input(str(f.file_path)).exists()]


def replace(table: Table, planned: IcebergState, bins: Sequence[RewrittenBin],
            properties: Mapping[str, str] | None = None) -> ReplaceResult:
    """Commit ``bins`` (rewritten from ``planned``, the state at the planned snapshot) to ``table`` as one
    ``replace`` snapshot. Raises StaleReplaceError (nothing committed) when the table changed in a way that
    touches the bins, LocalEngineRefusal when pyiceberg cannot commit it exactly, CommitOutcomeUnknown when
    the catalog did not answer whether it landed, ApplyError on any other failure (nothing committed)."""
    table.refresh()
    removed = tuple(p for b in bins for p in b.inputs)
    added = tuple(b.output for b in bins if b.output is not None)
    where = planned.identifier
    if len(set(removed)) != len(removed):
        raise ApplyError(f"{where}: a file is in two bins of one commit; nothing was committed")
    if table.metadata.format_version > MAX_FORMAT_VERSION:
        raise LocalEngineRefusal(f"{where}: pyiceberg 0.12 cannot commit to a format-version "
                                 f"{table.metadata.format_version} table; the spark engine does this")
    missing = _missing_outputs(table, added)
    if missing:
        raise ApplyError(f"{where}: {len(missing)} output(s) of the rewrite are missing, e.g. {missing[0]}; nothing "
                         "was committed")
    problems = stale_problems(table, planned, removed, added)
    if problems:
        raise StaleReplaceError(f"{where}: not committed, the plan is stale: {'; '.join(problems)}",
                                hint="plan again")
    head = table.metadata.current_snapshot()
    live = read_live(table.metadata, table.io, head.snapshot_id if head else None, where) \
        if head is not None and head.snapshot_id != planned.snapshot_id else planned.live
    producer = _ReplaceFiles(table, planned, removed, added, properties or {})
    for path in removed:
        producer.delete_data_file(live.data[path].file)
    for f in added:
        producer.append_data_file(f)
    try:
        producer.commit()
        producer._transaction.commit_transaction()
    except _Stale as e:
        raise StaleReplaceError(f"{where}: not committed, the plan is stale: {'; '.join(e.problems)}",
                                hint="plan again") from None
    except ValidationException as e:
        raise StaleReplaceError(f"{where}: not committed, the plan is stale: {e}", hint="plan again") from None
    except CommitStateUnknownException as e:
        raise CommitOutcomeUnknown(f"{where}: the catalog did not say whether the replace commit landed: {e}; keep "
                                   "its outputs until the table's history shows") from None
    except CommitFailedException as e:
        raise ApplyError(f"{where}: the replace commit failed after pyiceberg's retries (the table kept changing): "
                         f"{e}; nothing was committed") from None
    snapshot = table.metadata.snapshot_by_id(producer.snapshot_id)
    if snapshot is None or snapshot.summary is None or snapshot.summary.operation != Operation.REPLACE:
        raise CommitOutcomeUnknown(f"{where}: the replace snapshot {producer.snapshot_id} is not in the table's "
                                   "metadata after the commit")
    return ReplaceResult(
        snapshot_id=snapshot.snapshot_id, parent_id=snapshot.parent_snapshot_id,
        planned_snapshot_id=int(planned.snapshot_id or 0), removed=removed,
        added=tuple(str(f.file_path) for f in added),
        rows_removed=sum(int(live.data[p].file.record_count) for p in removed),
        rows_added=sum(int(f.record_count) for f in added))
