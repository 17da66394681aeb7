"""What a killed or failed sink rewrite left, cleaned up through the one crash journal (runtime/journal.py).

A sink rewrite's journal entry names its outputs (the new files in the partition folders), its `_`
staging folders and its inputs (the files the new manifest replaces), all relative to the sink root.
Recovery deletes outputs the visible manifest does not list and the staging folders; when some output is
listed (the run died after its manifest swap), the replaced inputs go to the grace-period ledger rather
than being deleted or forgotten. A run that may still be alive (runtime/journal.py:
``JournalEntry.running``) is never cleaned up: the sink then refuses (``SinkGuardError``), nothing changed.

The previous release kept its own journal, ``_compactor/sink_journal.json`` (locations instead of relative
paths, ``written_at`` and no heartbeat). ``_adopt_legacy_journal`` turns it into an entry of the one
journal, so a sink upgraded with a killed rewrite pending is recovered by the same rule.
"""

from __future__ import annotations

import json
import time
from collections.abc import Callable, Iterable, Sequence

from compactor.errors import SinkGuardError
from compactor.formats.file_sink.location import SinkRoot
from compactor.formats.file_sink.log import LogFile, MetadataLog
from compactor.formats.file_sink.state import LEDGER, read_ledger, sink_log
from compactor.runtime import clock, journal
from compactor.runtime.journal import DEFAULT_ORPHAN_GRACE_S, JournalEntry
from compactor.runtime.storage import ObjectNotFoundError

#: the journal of releases before the one crash journal (read by recovery only, never written)
LEGACY_JOURNAL = "_compactor/sink_journal.json"
#: the name its adopted entry gets in runtime/journal.py's folder
LEGACY_ACTION = "sink-legacy-journal"


def referenced(sink: SinkRoot, files: Callable[[MetadataLog], Iterable[LogFile]] | None = None) -> set[str]:
    """Relative paths of the data files the given log files (default: the visible ones) list."""
    mlog = sink_log(sink)
    out: set[str] = set()
    for lf in (mlog.visible_files() if files is None else files(mlog)):
        for e in mlog.read_entries(lf):
            found = sink.rel(e["path"])
            if found is not None:
                out.add(found)
    return out


class SinkReferences:
    """The deletion gate of a file sink (runtime/deletion.py): a file the given log files (default: the
    visible ones) list is kept, and so is any with a hidden name (``_spark_metadata``, ``_compactor``,
    staging folders, checksums); the log is read again at every judgement."""

    def __init__(self, sink: SinkRoot, files: Callable[[MetadataLog], Iterable[LogFile]] | None = None) -> None:
        self.sink, self.files = sink, files

    def kept(self, files: Sequence[str], folders: Sequence[str] = ()) -> dict[str, str]:
        listed = referenced(self.sink, self.files)
        out = {f: "listed by the sink's metadata log" for f in files if f in listed}
        out.update({f: "a hidden name" for f in files if f not in out
                    and any(part.startswith(("_", ".")) for part in f.split("/"))})
        for folder in folders:
            inside = next((r for r in sorted(listed) if r.startswith(folder.rstrip("/") + "/")), None)
            if inside is not None:
                out[folder] = f"it holds {inside}, listed by the sink's metadata log"
        return out


def add_to_ledger(sink: SinkRoot, files: list[str]) -> None:
    """Record replaced files (locations) for deletion after the grace period."""
    entries = read_ledger(sink)
    now = time.time()
    entries += [{"file": f, "replaced_at": now} for f in files]
    sink.storage.write_bytes(LEDGER, json.dumps(entries).encode())  # a kill mid-write never truncates it


def recover(sink: SinkRoot, grace_s: float = DEFAULT_ORPHAN_GRACE_S) -> list[str]:
    """Clean up after every sink rewrite that has provably ended (module docstring); returns the locations
    of the deleted outputs. Raises ``SinkGuardError`` (nothing changed) while some rewrite of this sink may
    still be under way. Call while holding the table lease."""
    _adopt_legacy_journal(sink)
    if journal.live_entries(sink.uri, sink.storage_options):
        _refuse()
    return clean_up(sink, grace_s)


def clean_up(sink: SinkRoot, grace_s: float = DEFAULT_ORPHAN_GRACE_S) -> list[str]:
    """The cleanup itself (runtime/journal.py ``recover``: runs that may be alive are skipped); after this
    process's own failed rewrite, whose entry says it ended."""
    deleted = journal.recover(sink.uri, lambda: SinkReferences(sink), grace_s=grace_s,
                              storage_options=sink.storage_options,
                              retire=lambda rels: add_to_ledger(sink, [sink.location(r) for r in rels]))
    return [sink.location(rel) for rel in deleted]


def _refuse() -> None:
    raise SinkGuardError("another compactor run's rewrite of this sink may still be under way (its journal is "
                         "younger than the lease TTL and its process cannot be proved gone); nothing changed",
                         hint="retry after the lease TTL (COMPACTOR_LEASE_TTL_S, default 15 minutes)")


def _adopt_legacy_journal(sink: SinkRoot) -> None:
    """The previous release's ``_compactor/sink_journal.json`` becomes an entry of the one journal (the
    same liveness rule: its ``written_at`` is its last heartbeat), then the old file is deleted. Refuses,
    touching nothing, while its run may still be alive (that release's own failure path reads the file)."""
    try:
        raw = json.loads(sink.storage.read_bytes(LEGACY_JOURNAL))
    except ObjectNotFoundError:
        return
    except ValueError:
        raw = {}  # torn: names nothing, and is judged stale (written_at 0)
    if not isinstance(raw, dict):
        raw = {}

    def rels(key: str) -> list[str]:
        found = (sink.rel_of_location(str(loc)) for loc in raw.get(key) or [])
        return [r for r in found if r]  # outside the root, or the root itself: never named

    written_at = float(raw.get("written_at") or 0.0)
    entry = JournalEntry(run_id="", action=LEGACY_ACTION, table_uri=sink.uri, read_version=None,
                         outputs=rels("files"), staging=rels("staging"), inputs=rels("inputs"),
                         host="", pid=0,  # that release recorded only the identity
                         started_at=written_at, heartbeat_at=written_at, identity=str(raw.get("identity") or ""))
    if entry.running(clock.wall()):
        _refuse()
    journal.adopt(sink.uri, entry, sink.storage_options)
    sink.storage.delete(LEGACY_JOURNAL)  # a kill before this: the next run adopts it again (same entry)
