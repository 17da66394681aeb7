"""Blockers: "apply refuses this table because ...", found by a table's format when it plans the table
(e.g. rows live twice in the table's log, answered by a planned repair). A blocker names the planned action that answers it, if one does;
``plan`` and ``apply`` exit 1 while one is unanswered, and apply touches nothing of that table.

How plan and apply speak of a kind of blocker is the format's: it registers a ``BlockerKind``
(planning/blocker_kinds.py) with its words (planning/vocabulary.py)."""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

#: one fact behind a blocker (a version, a count, the files it concerns)
BlockerDetail = int | str | bool | None | tuple[int, ...] | tuple[str, ...]


@dataclass(frozen=True)
class Blocker:
    """Why apply refuses a table until a planned action answers it."""

    #: what was found, as the format names it ("duplicate_rewrite"; registered with its words)
    kind: str
    #: the finding in one line
    message: str
    #: the facts behind it (the format reads them back: the answering action names them)
    details: Mapping[str, BlockerDetail] = field(default_factory=dict)
    #: the index, among the table's actions, of the planned action that answers it; None: none does
    answered_by: int | None = None

    def to_dict(self) -> dict[str, Any]:
        return {"kind": self.kind, "message": self.message,
                "details": {k: list(v) if isinstance(v, tuple) else v for k, v in self.details.items()},
                "answered_by": self.answered_by}

    @classmethod
    def from_dict(cls, d: Mapping[str, Any]) -> Blocker:
        details = {str(k): tuple(v) if isinstance(v, list) else v for k, v in (d.get("details") or {}).items()}
        return cls(kind=str(d["kind"]), message=str(d.get("message", "")), details=details,
                   answered_by=d.get("answered_by"))


def by_kind(blockers: Iterable[Blocker]) -> dict[str, list[Blocker]]:
    """``blockers`` grouped by kind, in the order each kind first appears."""
    out: dict[str, list[Blocker]] = {}
    for b in blockers:
        out.setdefault(b.kind, []).append(b)
    return out
