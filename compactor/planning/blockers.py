"""Blockers: "apply refuses this table because ...", found by a table's format when it plans the table
(e.g. rows live twice in the table's log, answered by a planned repair). A blocker names the planned action that answers it, if one does;
``plan`` and ``apply`` exit 1 while one is unanswered, and apply touches nothing of that table.

How plan and apply speak of a kind of blocker is the format's: it registers a ``BlockerKind`` with its
words (planning/vocabulary.py); the defaults here say it generically."""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:  # pragma: no cover
    from compactor.planning.actions import Action

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


@dataclass(frozen=True)
class BlockerKind:
    """How plan and apply speak of one kind of blocker. A format registers its kinds (subclassing this
    for its own words); a kind nobody registered is spoken of with these defaults."""

    #: the code blockers of this kind carry (``Blocker.kind``)
    kind: str
    #: what such a blocker means, in a few words: plan prints "<title>: <message>; <answer>"
    title: str
    #: the type of the action that answers one
    action: str

    def answer(self, blocker: Blocker, answered: bool) -> str:
        """What plan prints after the blocker's message: that the planned action answers it, or why none does."""
        if answered:
            return f"the {self.action} action above answers it"
        return f"no planned {self.action} action answers it: apply leaves the table alone"

    def refusal(self, blockers: Sequence[Blocker]) -> str:
        """Apply's error for a table it refuses because of ``blockers`` (none of them answered)."""
        return (f"{self.title}: {'; '.join(b.message for b in blockers)}; no planned {self.action} action answers "
                "it: the table was not touched")

    def summary(self, blockers: Sequence[Blocker]) -> str:
        """``blockers`` of a table in a few words (the markdown plan's table row)."""
        return f"**{self.kind.replace('_', ' ')}** ({len(blockers)}: {self.title})"

    def from_v1(self, table: Mapping[str, Any], actions: Sequence[Action]) -> tuple[Blocker, ...]:
        """The blockers a schema-version-1 plan's table holds in a field of its own (none by default)."""
        return ()
