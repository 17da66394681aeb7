"""How plan and apply speak of one kind of blocker (planning/blockers.py): a format registers its kinds
(planning/vocabulary.py), subclassing ``BlockerKind`` for its own words; the defaults here say it
generically."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from compactor.planning.actions import Action
from compactor.planning.blockers import Blocker


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
