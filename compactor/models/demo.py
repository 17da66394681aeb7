"""What `compactor demo` shows of a demo table, and the switches that leave one out: plain data the
formats fill (``TableFormat.demo``, compactor/formats/demo.py) and the CLI prints."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class DemoSwitch:
    """What leaves a format's demo table out: `compactor demo --no-<word>` (with this help), and
    ``with_<word>=False`` for ``api.demo``."""

    word: str
    help: str


@dataclass(frozen=True)
class TableSnapshot:
    """A demo table before or after the demo's compaction: its files, their sizes, its rows and the time a
    full scan of it took."""

    files: int
    bytes: int
    sizes: list[int]
    rows: int
    scan_s: float
    version: int
