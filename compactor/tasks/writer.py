"""`compactor compile`: what each selected policy asks of its table's writer, from the table's format
(``TableFormat.writer_settings``: e.g. a streaming writer's Spark settings and stream options)."""

from __future__ import annotations

from typing import TYPE_CHECKING

from compactor.formats import get_format
from compactor.models.writer import WriterSettings

if TYPE_CHECKING:  # pragma: no cover
    from compactor.project.compile import CompiledProject


def writer_settings(compiled: CompiledProject) -> list[WriterSettings]:
    """The writer settings of every selected policy that has some, in policy order."""
    out = []
    for p in compiled.policies:
        s = get_format(p.format).writer_settings(p)
        if s is not None:
            out.append(s)
    return out
