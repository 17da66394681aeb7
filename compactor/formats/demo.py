"""What `compactor demo` asks of a table format (``TableFormat.demo``): one small table of its kind,
written as the demo lake's, with the example project's policies for it. tasks/demo.py builds the lake
from every format's demo table, in the registry's order, and names none."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Protocol

from compactor.models.demo import DemoSwitch, TableSnapshot


class DemoTable(Protocol):
    #: the table's name in the demo project, and its folder under the demo lake
    name: str
    #: its policy files in the example project (compactor/example_project), written only when it is built
    policy_files: tuple[str, ...]
    #: what leaves it out (`compactor demo --no-<word>`); None: it is always built
    switch: DemoSwitch | None

    def unavailable(self) -> str | None:
        """Why it cannot be built here (the demo notes it and goes on without it); None: it can."""

    def build(self, path: Path, say: Callable[[str], None]) -> None:
        """Write the table at ``path``; ``say`` tells the user what is under way."""

    def snapshot(self, uri: str) -> TableSnapshot | None:
        """Its files and a timed full scan, for the demo's before/after; None: the demo shows none."""
