"""Commit a snapshot expiry through pyiceberg 0.12 (no JVM), conditional on the table being as it was checked.

pyiceberg's ``ExpireSnapshots`` (``table.maintenance.expire_snapshots()``) edits metadata only and deletes no
file, but commits with no requirement on the table: applied to whatever the catalog holds at the commit, its
``remove-snapshots`` update also removes every branch or tag pointing to a removed snapshot. A tag made on
one of them after compactor checked it would be lost silently. So the commit carries requirements:

- every branch and tag seen at the check still points to the same snapshot (``AssertRefSnapshotId``, which
  every catalog checks, the REST server included);
- where the catalog checks requirements itself, against the metadata it commits on under its own
  compare-and-swap (SQL, and pyiceberg's other non-REST catalogs), ``AssertExpirable``: every snapshot to
  expire is still there, is not the current one and no branch or tag points to it, a tag made since
  included. A REST server does not know this requirement: there a ref created on one of them in the instant
  between the check and the commit is not caught, and is dropped with it (docs/safety.md says so).

The one module besides replace.py pinned to pyiceberg's private API (its ``_commit`` and requirement
classes): the version is asserted at import, by replace.py's pin."""

from __future__ import annotations

from collections.abc import Callable, Collection
from typing import TYPE_CHECKING, Literal

from pyiceberg.exceptions import CommitFailedException, CommitStateUnknownException
from pyiceberg.table import Transaction
from pyiceberg.table.update import AssertRefSnapshotId, UpdatesAndRequirements, ValidatableTableRequirement
from pyiceberg.table.update.snapshot import ExpireSnapshots

from compactor.errors import ApplyError, StalePlanError
from compactor.formats.iceberg.replace import PINNED_PYICEBERG  # noqa: F401 - its import asserts the version

if TYPE_CHECKING:
    from pyiceberg.table import Table
    from pyiceberg.table.metadata import TableMetadata

#: how often a commit another writer's commit beat is checked and tried again
ATTEMPTS = 4


class ExpiryOutcomeUnknown(ApplyError):
    """The catalog did not say whether the expiry landed: nothing is deleted."""

    code = "commit_unknown"


def refs_of(md: TableMetadata) -> dict[str, int]:
    """Every branch and tag of ``md``: name -> snapshot id."""
    return {name: ref.snapshot_id for name, ref in md.refs.items()}


def unexpirable(md: TableMetadata, snapshot_ids: Collection[int]) -> list[str]:
    """Why ``snapshot_ids`` cannot all be expired from ``md`` as it is; empty when they can."""
    ids = set(snapshot_ids)
    out = []
    gone = sorted(ids - {s.snapshot_id for s in md.snapshots})
    if gone:
        out.append(f"snapshot(s) {gone} are no longer in the table's metadata (expired by another writer?)")
    if md.current_snapshot_id in ids:
        out.append(f"snapshot {md.current_snapshot_id} is now the current snapshot")
    out += [f"{ref.snapshot_ref_type.value} '{name}' now points to snapshot {ref.snapshot_id}"
            for name, ref in sorted(md.refs.items()) if ref.snapshot_id in ids]
    return out


class AssertExpirable(ValidatableTableRequirement):
    """The snapshots are still there, none current, none held by a branch or tag (checked by the catalog
    against the metadata it commits on)."""

    type: Literal["compactor-assert-expirable"] = "compactor-assert-expirable"
    snapshot_ids: list[int]

    def validate(self, base_metadata: TableMetadata | None) -> None:  # type: ignore[override] # pydantic's name
        if base_metadata is None:
            raise CommitFailedException("Requirement failed: current table metadata is missing")
        problems = unexpirable(base_metadata, self.snapshot_ids)
        if problems:
            raise CommitFailedException("Requirement failed: " + "; ".join(problems))


class _Expire(ExpireSnapshots):
    """pyiceberg's expiry, committed with compactor's requirements."""

    def __init__(self, transaction: Transaction, requirements: tuple[ValidatableTableRequirement, ...]) -> None:
        super().__init__(transaction)
        self._compactor_requirements = requirements

    def _commit(self) -> UpdatesAndRequirements:
        updates, requirements = super()._commit()
        return updates, (*requirements, *self._compactor_requirements)  # type: ignore[arg-type]


def _checks_requirements_itself(table: Table) -> bool:
    """The catalog validates requirements in this process (not a REST server, which knows only the spec's)."""
    return not type(table.catalog).__module__.startswith("pyiceberg.catalog.rest")


def expire(table: Table, snapshot_ids: Collection[int], where: str,
           check: Callable[[TableMetadata], list[str]] | None = None) -> None:
    """Expire ``snapshot_ids`` from ``table`` (as loaded), conditionally (module docstring), once ``unexpirable``
    and ``check`` (the caller's own rule) find nothing against them. When another writer's commit wins the
    catalog's compare-and-swap (an append moves ``main``), the table is read and checked again, up to
    ATTEMPTS times. Raises StalePlanError when a snapshot is no longer expirable (nothing committed),
    ExpiryOutcomeUnknown when the catalog did not say whether it landed, ApplyError when the table kept
    changing."""
    ids = sorted(set(snapshot_ids))
    for attempt in range(ATTEMPTS):
        problems = unexpirable(table.metadata, ids) + (check(table.metadata) if check is not None else [])
        if problems:
            raise StalePlanError(f"{where}: not expired, the plan is stale: {'; '.join(problems)}", hint="plan again")
        requirements: tuple[ValidatableTableRequirement, ...] = tuple(
            AssertRefSnapshotId(ref=name, snapshot_id=sid)  # type: ignore[call-arg] # pydantic: by name or alias
            for name, sid in sorted(refs_of(table.metadata).items()))
        if _checks_requirements_itself(table):
            requirements += (AssertExpirable(snapshot_ids=ids),)
        try:
            _Expire(Transaction(table, autocommit=True), requirements).by_ids(ids).commit()
            return
        except CommitStateUnknownException as e:
            raise ExpiryOutcomeUnknown(f"{where}: the catalog did not say whether the expiry landed: {e}; nothing was "
                                       "deleted") from None
        except CommitFailedException as e:
            if attempt == ATTEMPTS - 1:
                raise ApplyError(f"{where}: the expiry was not committed, the table kept changing: {e}; nothing was "
                                 "deleted") from None
            table.refresh()  # another writer's commit won: check the table as it is now
        except ValueError as e:  # by_id: no such snapshot, or one a ref protects (read from the same metadata)
            raise StalePlanError(f"{where}: not expired, the plan is stale: {e}", hint="plan again") from None
