"""What a Delta table run keeps across its actions (the TableSession of format "delta"): the open
DeltaTable, brought up to date before each use; the path index of the state the actions were checked on;
the next commit group, rewritten in the background while this one commits."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Protocol

from compactor.models.state import TableState
from compactor.models.table import TableLocation

if TYPE_CHECKING:  # pragma: no cover
    from deltalake import DeltaTable

    from compactor.formats.base import ActionContext
    from compactor.formats.delta.read.log_replay import Replay


class PendingWork(Protocol):
    """Work prepared ahead for an action that may not run (formats/delta/apply/rewrite.py, PendingGroup)."""

    def discard(self) -> None: ...


@dataclass
class PathIndex:
    """Row numbers of a state's files by path, and the columns its rows are read from (built once per
    state, as Python lists: picking rows with pyarrow's ``take`` would load pyarrow.compute)."""

    state: TableState
    rows: Mapping[str, int]
    lists: dict[str, list[Any]] = field(default_factory=dict, repr=False)

    def column(self, name: str) -> list[Any]:
        """The state's column ``name`` as a list (read on first use)."""
        values = self.lists.get(name)
        if values is None:
            values = self.lists[name] = self.state.files.column(name).to_pylist()
        return values


@dataclass
class DeltaSession:
    """The TableSession of a Delta table run: the open DeltaTable, the path index and the pending group."""

    location: TableLocation
    table: DeltaTable | None = None
    path_index: PathIndex | None = None
    pending: PendingWork | None = field(default=None, repr=False)
    #: the log's replay, brought to its newest version before each use (read once per table run)
    log: Replay | None = field(default=None, repr=False)

    def open_table(self) -> DeltaTable:
        """The table's DeltaTable, loaded once per table run, brought up to date."""
        from deltalake import DeltaTable

        from compactor.errors import TableReadError

        try:
            if self.table is None:
                self.table = DeltaTable(self.location.uri, storage_options=dict(self.location.storage_options) or None)
            else:
                self.table.update_incremental()
        except Exception as e:  # noqa: BLE001 - delta-rs raises several types
            from compactor.formats.delta.read.state import _reason

            raise TableReadError(f"{self.location.uri}: {_reason(self.location.uri, e)}") from None
        return self.table

    def index(self, state: TableState) -> PathIndex:
        if self.path_index is None or self.path_index.state is not state:
            paths = state.files.column("path").to_pylist()
            self.path_index = PathIndex(state, {p: i for i, p in enumerate(paths)}, {"path": paths})
        return self.path_index

    def replayed(self) -> Replay:
        """The log's file actions at its newest version (formats/delta/read/log_replay.py): the first call
        replays from the newest checkpoint, later ones read only the commits since."""
        from compactor.formats.delta.read.log_replay import advance, replay

        self.log = replay(self.location) if self.log is None else advance(self.log, self.location)
        return self.log

    def take_pending(self) -> PendingWork | None:
        pending, self.pending = self.pending, None
        return pending

    def discard_pending(self) -> None:
        pending = self.take_pending()
        if pending is not None:
            pending.discard()

    def close(self) -> None:
        """The table run is over: discard a group prepared for actions that did not run."""
        self.discard_pending()


def session_of(ctx: ActionContext) -> DeltaSession:
    """The table run's session; an action run on its own (no session in its context) gets one of its own."""
    if isinstance(ctx.session, DeltaSession):
        return ctx.session
    return DeltaSession(ctx.location)
