"""Iceberg's retention words (PURE, registered by actions.py): the ``expire_snapshots`` and
``remove_orphan_files`` actions a policy's ``retention:`` block plans (retention_plan.py), and the skip
reasons when there is nothing to do. Apply runs them through pyiceberg whichever the engine (retention_run.py).

Each action lists exactly what it does: the snapshot ids it expires and the files that expiring them
leaves unreferenced; the orphan files it deletes. The precondition's version is the snapshot the plan read,
its digest covers the files; apply re-derives what it may do from the table as it is then (the snapshots
must still be there, older than ``horizon_ms`` and unreferenced; every file is deleted only through the
deletion gate), so nothing but the listed snapshots and files is ever touched."""

from __future__ import annotations

from collections.abc import Collection
from dataclasses import dataclass, field
from enum import StrEnum
from typing import ClassVar

from compactor.planning.actions import Action, ActionRow, Precondition
from compactor.planning.skips import SkipKind
from compactor.policy.model import Retention, TablePolicy
from compactor.units import format_duration, format_size

_NOT_NEGATIVE = {"minimum": 0}
_FILES = {"items": {"type": "string", "minLength": 1}}


def _retention(policy: TablePolicy) -> Retention | None:
    return policy.retention if policy.enabled else None


class ListedFiles:
    """An Iceberg action whose ``files`` are no live data files (files it deletes; delete files or manifests it
    rewrites): only the precondition's digest of them is checked before it runs, and apply re-derives the
    rest from the table as it is then."""

    files: tuple[str, ...]
    input_files: int
    precondition: Precondition

    @property
    def digested_paths(self) -> tuple[str, ...]:
        return self.files

    def check(self, live: Collection[str]) -> None:
        self.precondition.check_digest(self.files)

    def _count_problems(self) -> list[str]:
        return ([] if self.input_files == len(self.files)
                else [f"input_files {self.input_files} does not match the {len(self.files)} file(s) it lists"])


@dataclass(frozen=True, kw_only=True)
class IcebergRetentionAction(ListedFiles, Action):
    """What both retention actions share: the policy's age and the instant it was measured from, and the
    files they delete (not live files: the digest alone is checked before they run)."""

    #: seconds (the policy's ``older_than``)
    older_than: int = field(metadata={"schema": _NOT_NEGATIVE, "required": True})
    #: the plan's time minus ``older_than``, ms since the epoch: only what is older than this is touched
    horizon_ms: int = field(metadata={"schema": _NOT_NEGATIVE, "required": True})
    #: the files it deletes (sorted), each only once the deletion gate proves no snapshot references it
    files: tuple[str, ...] = field(default=(), metadata={"schema": _FILES, "required": True})


@dataclass(frozen=True, kw_only=True)
class ExpireSnapshotsAction(IcebergRetentionAction):
    """Expire ``snapshots`` (older than ``horizon_ms``, none the current snapshot, none a branch or tag points
    to, none of the newest ``retain_last`` of the current history), then delete ``files``: the data and
    delete files only those snapshots' manifests name."""

    type: ClassVar[str] = "expire_snapshots"
    retain_last: int = field(metadata={"schema": {"minimum": 1}, "required": True})
    snapshots: tuple[int, ...] = field(default=(), metadata={"schema": {"minItems": 1}, "required": True})

    def policy_problems(self, policy: TablePolicy) -> list[str]:
        r = _retention(policy)
        if r is None or not r.expire_snapshots.enabled:
            return ["the policy does not enable retention.expire_snapshots"]
        e = r.expire_snapshots
        out = [f"{k} {have!r} is not the policy's {want!r}" for k, have, want in (
            ("older_than", self.older_than, e.older_than), ("retain_last", self.retain_last, e.retain_last)) if have != want]
        if len(set(self.snapshots)) != len(self.snapshots):
            out.append("a snapshot is listed twice")
        return out + self._count_problems()

    def row(self) -> ActionRow:
        return ActionRow("(table)", f"{len(self.snapshots)} snapshot(s), {len(self.files)} file(s)",
                         format_size(self.input_bytes),
                         f"older than {format_duration(self.older_than)}, keep the newest {self.retain_last}")


@dataclass(frozen=True, kw_only=True)
class RemoveOrphanFilesAction(IcebergRetentionAction):
    """Delete ``files``: files under the table's location no snapshot in its metadata referenced when
    planned, last modified before ``horizon_ms``."""

    type: ClassVar[str] = "remove_orphan_files"

    def policy_problems(self, policy: TablePolicy) -> list[str]:
        r = _retention(policy)
        if r is None or not r.remove_orphan_files.enabled:
            return ["the policy does not enable retention.remove_orphan_files"]
        want = r.remove_orphan_files.older_than
        out = [] if self.older_than == want else [f"older_than {self.older_than!r} is not the policy's {want!r}"]
        if not self.files:
            out.append("it lists no file")
        return out + self._count_problems()

    def row(self) -> ActionRow:
        return ActionRow("(table)", f"{len(self.files)} file(s)", format_size(self.input_bytes),
                         f"unreferenced, older than {format_duration(self.older_than)}")


class IcebergRetentionSkip(StrEnum):
    """Why a policy's Iceberg retention plans nothing."""

    #: no snapshot is old enough to expire (or every old one is current, referenced or among the newest kept)
    NOTHING_TO_EXPIRE = "iceberg_nothing_to_expire"
    #: no file under the table's location is unreferenced and old enough
    NO_ORPHAN_FILES = "iceberg_no_orphan_files"


RETENTION_ACTIONS: tuple[type[Action], ...] = (ExpireSnapshotsAction, RemoveOrphanFilesAction)
RETENTION_SKIPS = (SkipKind(IcebergRetentionSkip.NOTHING_TO_EXPIRE, "nothing to do"),
                   SkipKind(IcebergRetentionSkip.NO_ORPHAN_FILES, "nothing to do"))
