"""Pause Python's cyclic garbage collector around work that allocates many objects and makes no cycles.

Reading a large log window keeps hundreds of thousands of small objects alive (one per action), and
each of the collector's full passes walks all of them: parsing 200,000 add lines took 0.40-0.67 s with
the collector running and 0.31 s paused, the pause being longer the more objects were already alive
(measured in docs/benchmarks.md). Reference counting still frees everything as usual; only the search
for reference cycles waits until the block ends (the collector is process-wide: a block that finds it
off, paused by another thread or by the program, leaves it as it is).
"""

from __future__ import annotations

import contextlib
import gc
from collections.abc import Iterator


@contextlib.contextmanager
def gc_paused() -> Iterator[None]:
    was_enabled = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if was_enabled:
            gc.enable()
