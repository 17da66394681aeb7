"""The deletion gate of a Delta table, and the files a VACUUM may delete, by one rule computed from the log.

A file under the table root may be deleted only when all of these hold (delta-spark's VACUUM rule, from
``VacuumCommand.gc`` and ``DeltaTableUtils.isHiddenDirectory``, plus two protections of compactor's):

- it is not hidden: no folder or file name on its path starts with ``.`` or ``_``, except ``_change_data``,
  ``_delta_index`` and a partition folder ``<partition column>=...``; nor is any named ``metadata`` when
  UniForm writes Iceberg metadata (this keeps ``_delta_log``, ``_compactor``, staging folders and Spark's
  ``.crc`` checksums);
- no live add names it, as its data file or its deletion vector's file;
- no tombstone newer than the retention names it (data file or deletion vector); without a retention
  (crash recovery) no tombstone at all;
- it is older than the retention (delta-spark deletes nothing modified since the cutoff);
- compactor's: no change data file of a commit newer than the retention (``cdc``; a change-feed reader of
  such a version needs it; delta-spark relies on the file's age alone), and no file named
  ``deletion_vector_<uuid>.bin`` whose UUID a kept deletion vector has (whatever prefix a writer put
  before the name), nor a deletion vector stored by absolute path inside the table (delta-spark's VACUUM
  never counts those).

``DeltaReferences`` is the gate (runtime/deletion.py): before a delete it reads the commits made since its
replay and judges every listed file against the table as it is then. formats/delta/read/vacuum_listing.py lists
the table once and applies the same rule, so a plan's VACUUM list and apply's delete agree."""

from __future__ import annotations

import bisect
import time
from collections.abc import Iterable, Mapping, Sequence

from compactor.formats.delta.read.log import read_commit
from compactor.formats.delta.read.log_paths import dv_uuid_of, relative_to_root
from compactor.formats.delta.read.log_replay import LogListing, Replay, advance, list_log, replay
from compactor.models.table import TableLocation
from compactor.runtime.storage import storage_for

#: hidden names delta-spark's VACUUM still considers (isHiddenDirectory)
_NOT_HIDDEN = ("_delta_index", "_change_data")
_UNIFORM = "delta.universalFormat.enabledFormats"


def hidden(path: str, partition_columns: Sequence[str], uniform_iceberg: bool = False) -> str | None:
    """Why ``path`` (relative to the table) is hidden from VACUUM, or None (delta-spark's rule)."""
    for name in path.split("/"):
        if uniform_iceberg and name == "metadata":
            return "UniForm's Iceberg metadata folder"
        if name.startswith((".", "_")) and not name.startswith(_NOT_HIDDEN) \
                and not any(name.startswith(f"{c}=") for c in partition_columns):
            return f"a hidden name ({name!r}: names starting with '.' or '_' are never vacuumed)"
    return None


class DeltaReferences:
    """What the table references at ``version`` (its own log replay), with the retention cutoff (ms since
    the epoch; None: every tombstone counts, as crash recovery needs)."""

    def __init__(self, table: TableLocation, state: Replay, cutoff_ms: int | None,
                 commit_times: Mapping[int, int] | None = None) -> None:
        self.table = table
        self._state = state
        self.cutoff_ms = cutoff_ms
        self._commit_times = dict(commit_times or {})
        self._named: dict[str, str] = {}
        self._index()

    @property
    def version(self) -> int:
        return self._state.version

    def _index(self) -> None:
        st, cutoff = self._state, self.cutoff_ms
        why: dict[str, str] = {}
        uuids: dict[str, str] = {}
        for refs, kind in ((st.live.values(), "live file"),
                           ((r for r in st.tombstones.values() if cutoff is None or (r.deleted_at or 0) >= cutoff),
                            "file removed within the retention")):
            for ref in refs:
                why.setdefault(ref.path, f"a {kind}")
                if ref.dv is not None:
                    reason = f"the deletion vector of {kind} {ref.path}"
                    why.setdefault(ref.dv.path, reason)
                    if ref.dv.uuid is not None:
                        uuids.setdefault(ref.dv.uuid.lower(), reason)
        for path, reason in self._named.items():
            why.setdefault(path, reason)
        for version, paths in st.cdc.items():
            if self._recent(version):
                for p in paths:
                    why.setdefault(p, f"change data of version {version}, within the retention")
        self._why, self._uuids = why, uuids
        self._sorted = sorted(why)
        self._hidden_by = (st.partition_columns, "iceberg" in st.configuration.get(_UNIFORM, "").lower())

    def _recent(self, version: int) -> bool:
        if self.cutoff_ms is None:
            return True
        written = self._commit_times.get(version)
        return written is None or written >= self.cutoff_ms

    def why(self, path: str, mtime_ms: int | None = None) -> str | None:
        """Why ``path`` must not be deleted, or None when it may be (module docstring)."""
        reason = hidden(path, *self._hidden_by) or self._why.get(path)
        if reason is None and (ident := dv_uuid_of(path)) is not None:
            reason = self._uuids.get(ident)
        if reason is None and mtime_ms is not None and self.cutoff_ms is not None and mtime_ms >= self.cutoff_ms:
            reason = "modified within the retention"
        return reason

    def refresh(self) -> None:
        """Replay the commits made since (a RESTORE may have made a listed file live again, a remove given
        it a new tombstone); the cutoff stays, so a later commit can only keep more."""
        before = self._state.version
        advance(self._state, self.table)
        if self._state.version != before:
            now = int(time.time() * 1000)
            for v in range(before + 1, self._state.version + 1):
                self._commit_times.setdefault(v, now)
            self._index()

    def keep_named(self, versions: Iterable[int]) -> None:
        """Keep every file the commits of ``versions`` name (their adds and removes)."""
        for v in versions:
            commit = read_commit(self.table, v)
            for path in [*commit.adds, *commit.removes] if commit is not None else ():
                self._named.setdefault(relative_to_root(path, self.table.uri), f"named by version {v}")
        self._index()

    def read_change_data(self, listing: LogListing) -> None:
        """The change data files of the commits newer than the cutoff that the replay began after (those
        before its checkpoint): read only when a change data file would otherwise be deleted."""
        for v, written in sorted(listing.commits.items()):
            if v in self._state.cdc or (self.cutoff_ms is not None and written < self.cutoff_ms):
                continue
            commit = read_commit(self.table, v)
            if commit is not None:
                self._state.cdc[v] = tuple(relative_to_root(p, self.table.uri) for p in commit.cdc)
        self._index()

    def kept(self, files: Sequence[str], folders: Sequence[str] = ()) -> dict[str, str]:
        """The gate (runtime/deletion.py): the commits since are read first."""
        self.refresh()
        out = {f: r for f in files if (r := self.why(f)) is not None}
        for folder in folders:
            prefix = folder.rstrip("/") + "/"
            i = bisect.bisect_left(self._sorted, prefix)
            if i < len(self._sorted) and self._sorted[i].startswith(prefix):
                out[folder] = f"it holds {self._sorted[i]}: {self._why[self._sorted[i]]}"
        return out


def references(table: TableLocation, cutoff_ms: int | None = None, *,
               named_since: int | None = None) -> DeltaReferences:
    """The gate of ``table`` as its log says now (TableReadError when the log cannot be read with certainty).
    ``named_since``: also keep every file a commit after that version named (crash recovery: a dead run's
    output another commit has added and removed since is a file a reader of that version needs), read from
    the commits still in the log."""
    listing = list_log(storage_for(table.uri, table.storage_options))
    state = replay(table, listing)
    refs = DeltaReferences(table, state, cutoff_ms, listing.commits)
    if named_since is not None and state.checkpoint_version is not None:
        # the commits the replay read are counted already (adds live, removes tombstones, none expiring)
        refs.keep_named(v for v in sorted(listing.commits) if named_since < v <= state.checkpoint_version)
    return refs
