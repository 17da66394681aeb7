"""The engine interface. The runner (compactor.apply.runner) owns leases, preconditions, verification
and results; an engine only performs one planned action and reports what it committed."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Mapping, Protocol

from compactor.planning.plan import Action, TablePlan
from compactor.state.model import TableState


@dataclass(frozen=True)
class ActionContext:
    table: TablePlan
    #: the table state re-read just before this action (preconditions already checked)
    state: TableState
    storage_options: Mapping[str, str] = field(default_factory=dict, repr=False)
    #: custom commit metadata: {"compactor.version", "compactor.plan", "compactor.run_id", ...}
    commit_metadata: Mapping[str, str] = field(default_factory=dict)
    dry_run: bool = False


@dataclass
class ActionOutcome:
    files_removed: int = 0
    files_added: int = 0
    bytes_removed: int = 0
    bytes_added: int = 0
    #: from the log: sum of num_records of removed files / of added files
    rows_removed: int | None = None
    rows_added: int | None = None
    version_before: int | None = None
    version_after: int | None = None
    #: paths (relative to table root) this action removed and added, for verification and repair
    removed_paths: tuple[str, ...] = ()
    added_paths: tuple[str, ...] = ()
    details: dict[str, Any] = field(default_factory=dict)


class Engine(Protocol):
    name: str

    def versions(self) -> dict[str, str]:
        """Engine library versions for run results."""

    def run(self, action: Action, ctx: ActionContext) -> ActionOutcome:
        """Perform one action (compact, z_order, sort, vacuum, set_properties, sink_*)."""

    def close(self) -> None:
        """Release resources (a SparkSession this engine created, ...)."""
