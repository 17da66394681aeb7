"""The crash points of a file sink's compaction, and where they are (runtime/faults.py: tests arm them by
name)."""

from __future__ import annotations

CRASH_POINTS: dict[str, str] = {
    "sink.journal_written": "a sink rewrite's journal is written; nothing else",
    "sink.before_swap": "a sink rewrite's outputs are in place; the manifest not yet replaced",
    "sink.after_swap": "the manifest is replaced; the ledger and journal not yet updated",
}
