"""Delta's own plan words (PURE): its actions (vacuum, set_properties, repair), the skip reasons of its
retention, the blocker of rows live twice and the remedy of what only delta-spark's OPTIMIZE can compact.
Registered with planning/vocabulary.py when imported (the registry entry names this module)."""

from __future__ import annotations

from collections.abc import Collection, Mapping, Sequence
from dataclasses import dataclass, field
from enum import StrEnum
from typing import Any, ClassVar

from compactor.errors import PlanError, StalePlanError
from compactor.formats.delta.plan.purge_action import PURGE_SKIPS, PurgeAction
from compactor.formats.delta.plan.retention import declared_properties, vacuum_retention_hours
from compactor.models.duplicates import DuplicateReport
from compactor.planning.actions import SHARED_ACTIONS, Action, ActionRow, digest_paths
from compactor.planning.blocker_kinds import BlockerKind
from compactor.planning.blockers import Blocker
from compactor.planning.skips import Remedy, SkipKind
from compactor.planning.vocabulary import register
from compactor.policy.model import TablePolicy
from compactor.units import format_size

_NOT_NEGATIVE = {"minimum": 0}


@dataclass(frozen=True, kw_only=True)
class VacuumAction(Action):
    """VACUUM a Delta table: delete files it no longer references, older than ``retention_hours``."""

    type: ClassVar[str] = "vacuum"
    #: a dry run lists what it would delete (formats/delta/apply/maintenance.py), deleting nothing
    runs_in_dry_run: ClassVar[bool] = True
    retention_hours: int = field(metadata={"schema": _NOT_NEGATIVE})
    #: apply lists what the VACUUM would delete before deleting anything, and deletes nothing unless every
    #: file listed is in ``files`` (compactor/formats/delta/apply/maintenance.py)
    dry_run_first: bool = True
    #: how many files a vacuum would delete when planned (formats/delta/read/vacuum_listing.py), None when unknown
    files_to_delete: int | None = field(default=None, metadata={"schema": _NOT_NEGATIVE})
    #: those files, relative to the table root as stored, sorted (None when they could not be listed);
    #: the precondition's digest covers them, so an edited list is an edited plan
    files: tuple[str, ...] | None = field(default=None, metadata={"schema": {"description": (
        "the files the VACUUM would delete when planned (relative to the table root as stored, sorted; null when "
        "they could not be listed); with dry_run_first, apply deletes nothing unless every file its own dry run "
        "lists is here")}})

    @property
    def digested_paths(self) -> tuple[str, ...]:
        return self.files or ()

    def check(self, live: Collection[str]) -> None:
        """Only the digest: the files a vacuum deletes are never live (apply lists them again and the deletion
        gate proves each unreferenced right before the delete)."""
        self.precondition.check_digest(self.digested_paths)

    def policy_problems(self, policy: TablePolicy) -> list[str]:
        r = policy.retention
        out = []
        if r is None or not r.vacuum.enabled:
            out.append("the policy does not enable vacuum")
        elif self.retention_hours != vacuum_retention_hours(r):
            out.append(f"retention_hours {self.retention_hours} is not the policy's {vacuum_retention_hours(r)}")
        if r is not None and self.dry_run_first != r.vacuum.dry_run_first:
            out.append(f"dry_run_first {self.dry_run_first} is not the policy's {r.vacuum.dry_run_first}")
        if self.files is not None and self.files_to_delete != len(self.files):
            out.append(f"files_to_delete {self.files_to_delete} does not match the {len(self.files)} file(s) it lists")
        return out

    def row(self) -> ActionRow:
        n = self.files_to_delete
        return ActionRow("(table)", f"{n if n is not None else '?'} file(s)", "", f"retain {self.retention_hours}h")


@dataclass(frozen=True, kw_only=True)
class SetPropertiesAction(Action):
    """Set the Delta table properties its policy's retention declares (deleted-file and log retention)."""

    type: ClassVar[str] = "set_properties"
    properties: Mapping[str, str] = field(default_factory=dict, metadata={"required": True})
    #: the values before (for the reviewer)
    current: Mapping[str, str | None] = field(default_factory=dict)

    def policy_problems(self, policy: TablePolicy) -> list[str]:
        r = policy.retention
        declared = declared_properties(r) if r is not None and r.manage_properties else {}
        return [f"property {k}={v!r} is not what the policy declares ({declared.get(k)!r})"
                for k, v in self.properties.items() if declared.get(k) != v]

    def row(self) -> ActionRow:
        return ActionRow("(table)", "", "", ", ".join(f"{k}={v}" for k, v in self.properties.items()))


#: the blocker kind of rows live twice (one blocker per commit that made them so)
DUPLICATE_REWRITE = "duplicate_rewrite"
_PATH_ITEMS = {"items": {"type": "string", "minLength": 1}}


@dataclass(frozen=True, kw_only=True)
class RepairAction(Action):
    """Take out the extra copy of rows another writer's (or a stale) commit made live twice: remove
    ``remove`` (live) and bring back ``restore`` (removed; re-added, or copied under a new name when VACUUM
    may already delete it) in one dataChange=false commit, proved on the files' contents first
    (formats/delta/duplicates/repair.py). Listed first in its table's actions; apply re-derives it from the log and
    runs it only when the derived repair is this one."""

    type: ClassVar[str] = "repair"
    #: the versions of the commits that made rows live twice
    anomalies: tuple[int, ...] = field(metadata={"schema": {"items": {"type": "integer", "minimum": 0},
                                                            "minItems": 1}})
    #: every commit the repair reverts (the anomalies and the rewrites of their files since)
    chain: tuple[int, ...] = field(default=(), metadata={"schema": {"items": {"type": "integer", "minimum": 0}}})
    remove: tuple[str, ...] = field(default=(), metadata={"schema": _PATH_ITEMS, "required": True})
    restore: tuple[str, ...] = field(default=(), metadata={"schema": _PATH_ITEMS, "required": True})
    #: the first version of the log window it was derived from (apply reads the same window)
    window_start: int | None = field(default=None, metadata={"schema": _NOT_NEGATIVE})
    #: rows of the files removed and restored (the log's numRecords; apply proves them on the files)
    rows_removed: int | None = field(default=None, metadata={"schema": _NOT_NEGATIVE})
    rows_restored: int | None = field(default=None, metadata={"schema": _NOT_NEGATIVE})

    @property
    def input_paths(self) -> tuple[str, ...]:
        return (*self.remove, *self.restore)

    def check(self, live: Collection[str]) -> None:
        """The digest covers remove then restore; what it removes must be live, what it restores not."""
        if digest_paths(self.input_paths) != self.precondition.digest:
            raise PlanError("the repair's files do not match its precondition digest: the plan was edited "
                            "after `compactor plan` wrote it", hint="re-run `compactor plan`")
        gone = [p for p in self.remove if p not in live]
        back = [p for p in self.restore if p in live]
        if gone or back:
            raise StalePlanError(f"the table changed where the repair works ({len(gone)} file(s) to remove no longer "
                                 f"live, {len(back)} to restore live again)", hint="re-run `compactor plan`")

    def policy_problems(self, policy: TablePolicy) -> list[str]:
        return []  # no policy setting shapes a repair: apply derives it again from the log and runs only that

    def row(self) -> ActionRow:
        rows = "?" if self.rows is None else f"{self.rows:,}"
        return ActionRow("(table)", f"remove {len(self.remove)}, restore {len(self.restore)}",
                         format_size(self.input_bytes),
                         f"{rows} extra row(s) out (versions {', '.join(map(str, self.anomalies))})")

    def answers(self, blocker: Blocker) -> bool:
        return blocker.kind == DUPLICATE_REWRITE and blocker.details.get("later_version") in self.anomalies


def duplicate_blocker(report: DuplicateReport, actions: Sequence[Action]) -> Blocker:
    """The blocker of one commit that made rows live twice, answered by the planned repair that names it."""
    rows = "?" if report.rows is None else f"{report.rows:,}"
    details = {k: tuple(v) if isinstance(v, list) else v for k, v in report.to_dict().items()}
    blocker = Blocker(DUPLICATE_REWRITE, f"version {report.later_version} ({report.kind}) made {rows} rows of "
                      f"{len(report.files)} file(s) live a second time", details)
    answering = next((i for i, a in enumerate(actions) if a.answers(blocker)), None)
    return Blocker(blocker.kind, blocker.message, details, answering)


@dataclass(frozen=True)
class DuplicateRewrites(BlockerKind):
    """Rows live twice, in the words plan and apply have always used for them."""

    def answer(self, blocker: Blocker, answered: bool) -> str:
        if answered:
            return "the repair action above takes the extra copy out"
        return f"NOT repaired automatically: {blocker.details.get('reason') or 'see `compactor repair --dry-run`'}"

    def refusal(self, blockers: Sequence[Blocker]) -> str:
        versions = sorted({_version(b) for b in blockers})
        reasons = sorted({str(b.details["reason"]) for b in blockers if b.details.get("reason")})
        return (f"rows live twice since version(s) {versions} and compactor will not repair them automatically"
                f"{': ' + '; '.join(reasons) if reasons else ''}; the table was not touched (`compactor repair "
                "--dry-run` explains; RESTORE to a version before it, or deduplicate by hand)")

    def summary(self, blockers: Sequence[Blocker]) -> str:
        versions = ", ".join(str(_version(b)) for b in blockers)
        return f"**duplicate rewrite** (versions {versions}: rows live twice)"

    def from_v1(self, table: Mapping[str, Any], actions: Sequence[Action]) -> tuple[Blocker, ...]:
        """A version-1 plan lists rows live twice as ``duplicate_rewrite``, answered by the repair naming them."""
        return tuple(duplicate_blocker(DuplicateReport.from_dict(x), actions)
                     for x in table.get("duplicate_rewrite") or ())


def _version(blocker: Blocker) -> int:
    """The commit that made the rows live twice (a repair names it among its anomalies)."""
    v = blocker.details.get("later_version")
    return v if isinstance(v, int) else -1


class DeltaSkipReason(StrEnum):
    """Why Delta's retention plans nothing (besides the reasons every format shares)."""

    RETENTION_IN_SYNC = "retention_in_sync"  # table properties already match the declared retention
    NOTHING_TO_VACUUM = "nothing_to_vacuum"  # a VACUUM now would delete no file


#: the ``needs`` detail of a skip only delta-spark's OPTIMIZE would not have (deletion vectors, table
#: features delta-rs cannot write, paths it cannot reproduce): the spark engine's native OPTIMIZE
NATIVE_OPTIMIZE = "native_optimize"

register("delta", actions=(VacuumAction, SetPropertiesAction, RepairAction, PurgeAction), shared=SHARED_ACTIONS,
         skips=(SkipKind(DeltaSkipReason.RETENTION_IN_SYNC, "nothing to do"),
                SkipKind(DeltaSkipReason.NOTHING_TO_VACUUM, "nothing to do"), *PURGE_SKIPS),
         blockers=(DuplicateRewrites(DUPLICATE_REWRITE, "rows live twice", "repair"),),
         remedies={NATIVE_OPTIMIZE: Remedy("spark", "delta-spark's OPTIMIZE", "compaction.method: optimize (or auto)")})
