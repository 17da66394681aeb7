"""What a repair of rows live twice in a Delta table did (repair.py), and how `compactor repair` words it
(``RepairOutcome.text``)."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from compactor.formats.delta.duplicates.repair_plan import RepairProposal
from compactor.models.duplicates import DuplicateReport, LogWindow


@dataclass
class RepairResult:
    """What a repair did. status: clean (nothing to do), repaired, would_repair (dry run)."""

    uri: str
    status: str
    duplicates: list[DuplicateReport] = field(default_factory=list)
    commits: list[int] = field(default_factory=list)  # the repair commits' versions
    files_removed: int = 0
    files_restored: int = 0
    #: restored files copied under a new name (their tombstones were too old to re-add)
    files_copied: int = 0
    rows_removed: int = 0
    rows_restored: int = 0
    version_before: int | None = None
    version_after: int | None = None
    window: LogWindow = field(default_factory=LogWindow)
    #: the repair proved (and committed, unless a dry run)
    proposal: RepairProposal | None = None

    @property
    def rows_deduplicated(self) -> int:
        return self.rows_removed - self.rows_restored

    def to_dict(self) -> dict[str, Any]:
        return {"uri": self.uri, "status": self.status, "duplicates": [d.to_dict() for d in self.duplicates],
                "repair_versions": self.commits, "files_removed": self.files_removed,
                "files_restored": self.files_restored, "files_copied": self.files_copied,
                "rows_removed": self.rows_removed, "rows_restored": self.rows_restored,
                "rows_deduplicated": self.rows_deduplicated, "version_before": self.version_before,
                "version_after": self.version_after, "window": self.window.to_dict(),
                "remove": list(self.proposal.remove) if self.proposal else [],
                "restore": list(self.proposal.restore) if self.proposal else []}

    def text(self, table: str) -> tuple[str, ...]:
        """How `compactor repair` words this result (clean, would_repair or repaired) for the table named
        ``table``: the rows live twice it found, the files removed and restored, the rows, as proved on the files."""
        if self.status == "clean":
            return (f"{table}: no duplicate rewrites (versions {self.window.first_version}..{self.window.last_version} "
                    "scanned)",)
        lines = []
        verb = "would repair" if self.status == "would_repair" else "repaired"
        for d in self.duplicates:
            rows = "?" if d.rows is None else f"{d.rows:,}"
            lines.append(f"{table}: {verb} rows live twice: version {d.later_version} ({d.kind}) made "
                         f"{rows} rows of {len(d.files)} file(s) live a second time")
        where = f" in version(s) {', '.join(map(str, self.commits))}" if self.commits else ""
        copied = f" ({self.files_copied} as new copies: VACUUM may delete the originals)" if self.files_copied else ""
        lines.append(f"  {self.files_removed} file(s) removed, {self.files_restored} restored{copied}{where}: "
                     f"{self.rows_removed:,} rows removed, {self.rows_restored:,} restored, "
                     f"{self.rows_deduplicated:,} duplicated rows gone (proved on the files)")
        if self.proposal is not None:
            lines += [f"    - {p}" for p in self.proposal.remove]
            lines += [f"    + {p}" for p in self.proposal.restore]
        return tuple(lines)
