"""Progress events of a run, as typed data: tasks emit them through a ``Progress`` callback, and
``output/apply_render.py`` renders them (the CLI's live lines); an API caller may record them."""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass

from compactor.models.results import ActionResult, DuplicateFound


@dataclass(frozen=True)
class ActionStarted:
    """An action of a table's plan starts (``bytes``: its input bytes)."""

    table: str
    action: str
    partition: Mapping[str, str | None]
    bytes: int
    #: the action's index in the table's plan, and how many actions the table has
    index: int
    count: int


@dataclass(frozen=True)
class GroupStarted:
    """A commit group: actions ``first``..``last`` (indices) of ``count`` share one commit."""

    table: str
    first: int
    last: int
    count: int
    bins: int
    bytes: int


@dataclass(frozen=True)
class BinsDone:
    """A bin was rewritten: the table's bins and bytes done so far, and their totals."""

    table: str
    bins_done: int
    bins_total: int
    bytes_done: int
    bytes_total: int


@dataclass(frozen=True)
class ActionFinished:
    """An action ended; ``result`` says how."""

    table: str
    result: ActionResult


@dataclass(frozen=True)
class OutOfTime:
    """max_runtime was reached: ``skipped`` actions are left for the next run."""

    table: str
    skipped: int
    max_runtime_s: float


@dataclass(frozen=True)
class Interrupted:
    """The run was asked to stop (Ctrl-C): ``skipped`` actions of the table are left for the next run."""

    table: str
    skipped: int


@dataclass(frozen=True)
class WatchWaiting:
    """The run waits up to ``seconds`` for what is left of the tables' post-commit watch windows."""

    tables: Sequence[str]
    seconds: float


@dataclass(frozen=True)
class DuplicateFoundLater:
    """The post-commit watch found a later commit that removed files compactor had just rewritten."""

    table: str
    found: DuplicateFound


ProgressEvent = (ActionStarted | GroupStarted | BinsDone | ActionFinished | OutOfTime | Interrupted | WatchWaiting
                 | DuplicateFoundLater)
Progress = Callable[[ProgressEvent], None]
