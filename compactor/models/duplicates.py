"""Rows live twice, as reported: one ``DuplicateReport`` per commit that made rows live twice (the plan's
``duplicate_rewrite``, ``inspect``, ``repair`` and run results), and the log window a scan covered."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any


@dataclass(frozen=True)
class DuplicateReport:
    """One commit that made rows live twice, as plans, ``inspect``, ``repair`` and run results report it."""

    #: double_remove | readd | stale_repair (plan.schema.json, $defs/duplicate_rewrite)
    kind: str
    #: the commit whose adds hold the extra copy
    later_version: int
    #: the commits that removed the files first
    earlier_versions: tuple[int, ...]
    #: the files whose rows are live twice
    files: tuple[str, ...]
    #: rows live twice (None: unknown)
    rows: int | None
    #: open | unrepairable | repaired | gone
    status: str = "open"
    repaired_by: int | None = None
    #: the live files holding the extra rows
    carriers: tuple[str, ...] = ()
    repairable: bool = True
    reason: str = ""

    def to_dict(self) -> dict[str, Any]:
        return {"kind": self.kind, "later_version": self.later_version, "earlier_versions": list(self.earlier_versions),
                "files": list(self.files), "rows": self.rows, "status": self.status, "repaired_by": self.repaired_by,
                "carriers": list(self.carriers), "repairable": self.repairable,
                **({"reason": self.reason} if self.reason else {})}

    @classmethod
    def from_dict(cls, d: Mapping[str, Any]) -> DuplicateReport:
        return cls(kind=str(d["kind"]), later_version=int(d["later_version"]),
                   earlier_versions=tuple(int(v) for v in d.get("earlier_versions") or ()),
                   files=tuple(d.get("files") or ()), rows=d.get("rows"), status=str(d.get("status", "open")),
                   repaired_by=d.get("repaired_by"), carriers=tuple(d.get("carriers") or ()),
                   repairable=bool(d.get("repairable", True)),
                   reason=str(d.get("reason") or ""))


@dataclass(frozen=True)
class LogWindow:
    """The commits a scan of the log covered."""

    first_version: int | None = None
    last_version: int | None = None

    @property
    def commits(self) -> int:
        if self.first_version is None or self.last_version is None:
            return 0
        return self.last_version - self.first_version + 1

    def to_dict(self) -> dict[str, int | None]:
        return {"first_version": self.first_version, "last_version": self.last_version, "commits": self.commits}
