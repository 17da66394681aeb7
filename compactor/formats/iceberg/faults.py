"""The crash points of Iceberg's write paths, and where they are (runtime/faults.py: tests arm them by name):
``COMPACT_CRASH_POINTS`` on a compact action's path (every engine), the maintenance action's (spark engine)."""

from __future__ import annotations

CRASH_POINTS: dict[str, str] = {
    "iceberg.journal_written": "a compact action's journal entry is on storage; no output written yet",
    "iceberg.outputs_written": "every bin's output is written, named by the journal and verified; no commit yet",
    "iceberg.after_commit": "the replace snapshot is committed; the journal not yet closed",
    "iceberg.maintenance_checked": "a maintenance action's inputs are checked against the table; Iceberg's own "
                                   "action not yet run",
}

#: the points a compact action passes (the kill tests of the compaction path arm each)
COMPACT_CRASH_POINTS: tuple[str, ...] = ("iceberg.journal_written", "iceberg.outputs_written", "iceberg.after_commit")
