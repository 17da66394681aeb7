"""Iceberg's own maintenance words (PURE, registered by actions.py): the ``rewrite_position_deletes`` and
``rewrite_manifests`` actions a policy's ``compaction.position_deletes`` and ``compaction.manifests`` plan
(maintenance_plan.py), and the skip reasons when there is nothing to do. The spark engine runs them through
Iceberg's own Spark actions (maintenance_run.py); the local engine refuses them (pyiceberg 0.12 has neither).

Each action lists exactly what it rewrites: one partition's position delete files, or one partition spec's
manifests of the planned snapshot. The precondition's version is that snapshot, its digest covers the
listed files; apply re-checks on the table as it is then that the listed files are still exactly what
Iceberg's action would rewrite (stale otherwise: nothing is committed)."""

from __future__ import annotations

from dataclasses import dataclass, field
from enum import StrEnum
from typing import ClassVar

from compactor.formats.iceberg.retention_actions import ListedFiles
from compactor.planning.actions import Action, ActionRow, partition_label
from compactor.planning.skips import SkipKind
from compactor.policy.model import TablePolicy
from compactor.units import format_size

_FILES = {"items": {"type": "string", "minLength": 1}, "minItems": 1}


@dataclass(frozen=True, kw_only=True)
class IcebergMaintenanceAction(ListedFiles, Action):
    """What both maintenance actions share: the partition spec they are scoped to and the files they
    rewrite (delete files or manifests, not live data files: only the digest is checked before they run)."""

    spec_id: int = field(metadata={"schema": {"minimum": 0}, "required": True})
    #: the files it rewrites (sorted)
    files: tuple[str, ...] = field(default=(), metadata={"schema": _FILES, "required": True})

    def _shape_problems(self) -> list[str]:
        """Besides the count (apply re-checks the listed files on the table itself: maintenance_run.py)."""
        out = self._count_problems()
        if len(set(self.files)) != len(self.files):
            out.append("a file is listed twice")
        return out


@dataclass(frozen=True, kw_only=True)
class RewritePositionDeletesAction(IcebergMaintenanceAction):
    """Rewrite ``files``, every live position delete file of one partition (``partition``, of the spec
    ``spec_id``), into as few files as Iceberg's writer makes, dropping the deletes of data files no longer
    live (Iceberg's ``rewritePositionDeletes`` with ``rewrite-all``, filtered to this partition)."""

    type: ClassVar[str] = "rewrite_position_deletes"
    min_input_files: int = field(metadata={"schema": {"minimum": 2}, "required": True})
    #: of ``files``, those that apply to no live data file when planned (their deletes are all dropped)
    dangling: int = field(default=0, metadata={"schema": {"minimum": 0}})

    def policy_problems(self, policy: TablePolicy) -> list[str]:
        p = policy.compaction.position_deletes
        if not policy.enabled or not p.enabled:
            return ["the policy does not enable compaction.position_deletes"]
        out = [] if self.min_input_files == p.min_input_files else [
            f"min_input_files {self.min_input_files!r} is not the policy's {p.min_input_files!r}"]
        if len(self.files) < p.min_input_files:
            out.append(f"it lists {len(self.files)} file(s), fewer than min_input_files {p.min_input_files}")
        return out + self._shape_problems()

    def row(self) -> ActionRow:
        return ActionRow(partition_label(self.partition), f"{len(self.files)} delete file(s) -> "
                         f"{self.expected_output_files}", format_size(self.input_bytes),
                         f"spec {self.spec_id}, {self.dangling} dangling")


@dataclass(frozen=True, kw_only=True)
class RewriteManifestsAction(IcebergMaintenanceAction):
    """Rewrite ``files``, the manifests of the partition spec ``spec_id`` the planned snapshot names (data
    manifests, and delete manifests when there are several), into manifests clustered by partition
    (Iceberg's ``rewriteManifests`` for that spec); no data or delete file is added or removed."""

    type: ClassVar[str] = "rewrite_manifests"
    #: manifests lie in the table's metadata folder: maintenance_run.py checks they are the planned snapshot's
    lists_metadata: ClassVar[bool] = True
    min_count: int = field(metadata={"schema": {"minimum": 2}, "required": True})
    #: the live data and delete files the listed manifests name (each stays live, in a new manifest)
    entries: int = field(default=0, metadata={"schema": {"minimum": 0}})

    def policy_problems(self, policy: TablePolicy) -> list[str]:
        m = policy.compaction.manifests
        if not policy.enabled or not m.enabled:
            return ["the policy does not enable compaction.manifests"]
        out = [] if self.min_count == m.min_count else [f"min_count {self.min_count!r} is not the policy's {m.min_count!r}"]
        return out + self._shape_problems()

    def row(self) -> ActionRow:
        return ActionRow(f"(spec {self.spec_id})", f"{len(self.files)} manifest(s) -> {self.expected_output_files}",
                         format_size(self.input_bytes), f"{self.entries:,} entries")


class IcebergMaintenanceSkip(StrEnum):
    """Why a policy's Iceberg maintenance plans nothing."""

    #: no partition holds ``min_input_files`` position delete files
    FEW_DELETE_FILES = "iceberg_few_delete_files"
    #: no partition spec has ``min_count`` manifests in the current snapshot
    FEW_MANIFESTS = "iceberg_few_manifests"
    #: the engine has no exact way to run it (the local engine: pyiceberg 0.12 rewrites neither)
    NEEDS_SPARK = "iceberg_maintenance_needs_spark"


MAINTENANCE_ACTIONS: tuple[type[Action], ...] = (RewritePositionDeletesAction, RewriteManifestsAction)
MAINTENANCE_SKIPS = (SkipKind(IcebergMaintenanceSkip.FEW_DELETE_FILES, "nothing to do"),
                     SkipKind(IcebergMaintenanceSkip.FEW_MANIFESTS, "nothing to do"),
                     SkipKind(IcebergMaintenanceSkip.NEEDS_SPARK, "apply with the spark engine: Iceberg's own Spark "
                              "actions rewrite delete files and manifests"))
