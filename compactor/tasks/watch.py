"""The post-commit watch: after compactor commits a rewrite, another writer that read the table before
that commit can still commit its own rewrite of the same files later (a format's library may let it), and then every
row of those files is live twice. For a bounded window after each commit, a background thread reads the
new commits of the table (only those: one small read per commit) and, as soon as one removes an input of
compactor's commit again, reports it on that action's result and fails the run: rows are live twice, and
their repair is planned by the next ``compactor plan`` and reviewed like any change (a repair is never
improvised: README, Safety model).

No sleep in the hot path: the thread polls while the table's later actions and the other tables run. The
runner keeps the table's lease until the window has passed, and at the end of the run waits only for what
is left of the windows (``finish``), then polls once more.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from compactor.formats.base import TableFormat
from compactor.models.events import DuplicateFoundLater, Progress
from compactor.models.results import ActionResult, DuplicateFound
from compactor.models.table import TableLocation

log = logging.getLogger(__name__)

#: how often the log is read while a window is open
DEFAULT_POLL_S = 1.0


@dataclass
class _Watched:
    """One commit under watch: the inputs it replaced, until ``deadline`` (monotonic); hits fail ``result``."""

    version_before: int
    version_after: int
    inputs: frozenset[str]
    deadline: float
    result: ActionResult
    #: the commits up to this version have been checked against ``inputs``
    checked: int = -1


@dataclass
class TableWatch:
    """Watches one table. ``lock`` serialises the watch's repairs with the runner's own actions."""

    fmt: TableFormat
    table: str
    location: TableLocation
    window_s: float
    commit_metadata: Mapping[str, str]
    poll_s: float = DEFAULT_POLL_S
    progress: Progress | None = None
    lock: threading.Lock = field(default_factory=threading.Lock)
    repairs: list[DuplicateFound] = field(default_factory=list)
    errors: list[str] = field(default_factory=list)

    def __post_init__(self) -> None:
        self._watched: list[_Watched] = []
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self._mutex = threading.Lock()

    @staticmethod
    def supported(fmt: TableFormat) -> bool:
        return fmt.duplicates is not None

    @property
    def deadline(self) -> float:
        with self._mutex:
            return max((w.deadline for w in self._watched), default=0.0)

    @property
    def active(self) -> bool:
        return time.monotonic() < self.deadline

    def add(self, version_before: int, version_after: int, inputs: Any, result: ActionResult) -> None:
        """Watch the inputs of a commit at ``version_after`` (read at ``version_before``)."""
        with self._mutex:
            self._watched.append(_Watched(version_before, version_after, frozenset(inputs),
                                          time.monotonic() + self.window_s, result, checked=version_after))
        if self._thread is None or not self._thread.is_alive():
            self._stop.clear()
            self._thread = threading.Thread(target=self._run, name=f"watch-{self.table}", daemon=True)
            self._thread.start()

    def _run(self) -> None:
        while not self._stop.wait(self.poll_s):
            self.poll()
            if not self.active:
                return

    def poll(self) -> None:
        """Read the commits since the last poll; report when one removed a watched input again."""
        with self._mutex:
            watched = list(self._watched)
        if not watched:
            return
        cursor = min(w.checked for w in watched)
        try:
            assert self.fmt.duplicates is not None  # TableWatch.supported
            last, removed = self.fmt.duplicates.removals_after(self.location, cursor)
        except Exception as e:  # noqa: BLE001 - a failed read is retried at the next poll
            log.warning("%s: could not read new commits while watching: %s", self.table, e)
            return
        hits = []
        for w in watched:
            h = {p: max(vs) for p, vs in removed.items() if p in w.inputs and max(vs) > w.checked}
            w.checked = max(w.checked, last)
            if h:
                hits.append((w, h))
        if hits:
            self._report(hits)

    def _report(self, hits: list[tuple[_Watched, dict[str, int]]]) -> None:
        versions = sorted({v for _, h in hits for v in h.values()})
        msg = (f"version(s) {versions} removed files compactor had already rewritten: rows are live twice; "
               "`compactor plan` plans their repair (`compactor repair` shows and applies it)")
        log.warning("%s: %s", self.table, msg)
        self.errors.append(msg)
        info = DuplicateFound("watch", versions)
        self.repairs.append(info)
        for w, _h in hits:
            w.result.status, w.result.error = "error", msg
            w.result.details.duplicated_later = info
        if self.progress:
            self.progress(DuplicateFoundLater(self.table, info))

    def finish(self) -> None:
        """Wait for what is left of the window, poll a last time, stop the thread."""
        remaining = self.deadline - time.monotonic()
        if remaining > 0:
            self._stop.wait(remaining)
        self._stop.set()
        if self._thread is not None:
            self._thread.join(timeout=max(60.0, self.poll_s * 4))
        self.poll()

    def stop(self) -> None:
        self._stop.set()
