"""The crash points of Delta's write paths, and where they are (runtime/faults.py: tests arm them by name)."""

from __future__ import annotations

CRASH_POINTS: dict[str, str] = {
    "delta.journal_written": "a rewrite's journal names its outputs; nothing written yet",
    "delta.outputs_written": "a commit group's outputs are written and verified; no pre-commit check yet",
    "delta.before_commit": "every output written and verified; the commit not yet attempted",
    "delta.after_commit": "the commit is in the log; the journal not yet closed",
    "delta.repair_before_commit": "a repair's copies are written; its commit not yet attempted",
    "delta.repair_after_commit": "a repair's commit is in the log",
    "delta.vacuum_listed": "a VACUUM's files are listed (apply's dry run); none deleted yet",
}
