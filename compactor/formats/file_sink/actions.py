"""A file sink's own plan words (PURE): its actions (sink_compact, sink_prune, sink_delete_replaced), each
carrying the guards it re-checks before touching the log, and the skip reasons of those guards.
Registered with planning/vocabulary.py when imported (the registry entry names this module)."""

from __future__ import annotations

from collections.abc import Collection
from dataclasses import dataclass, field
from enum import StrEnum
from typing import ClassVar, TypedDict

from compactor.errors import PlanError
from compactor.planning.actions import Action, RewriteAction, digest_paths
from compactor.planning.skips import SkipKind
from compactor.planning.vocabulary import register
from compactor.policy.model import DownstreamReaders, Sink, TablePolicy

_NOT_NEGATIVE = {"minimum": 0}


@dataclass(frozen=True, kw_only=True)
class SinkGuards:
    """What a file-sink action re-checks before touching the log (copied from the policy at plan time)."""

    quiet_period: int = field(default=600, metadata={"schema": _NOT_NEGATIVE})
    checkpoint: str | None = None
    writer_stopped_check: bool = True
    downstream_streaming_readers: DownstreamReaders = "unknown"
    grace_period: int = field(default=3600, metadata={"schema": _NOT_NEGATIVE})
    #: the log as planned: apply refuses when the writer has written batches since
    latest_compact: str | None = None
    latest_batch: int | None = field(default=None, metadata={"schema": _NOT_NEGATIVE})

    def guard_problems(self, policy: TablePolicy) -> list[str]:
        """The guards the policy's ``sink:`` block would not have given (the log as planned is no setting)."""
        sink = policy.sink or Sink()
        return [f"{k} {have!r} is not the policy's {want!r}" for k, have, want in (
            ("quiet_period", self.quiet_period, sink.quiet_period), ("checkpoint", self.checkpoint, sink.checkpoint),
            ("writer_stopped_check", self.writer_stopped_check, sink.writer_stopped_check),
            ("downstream_streaming_readers", self.downstream_streaming_readers, sink.downstream_streaming_readers),
            ("grace_period", self.grace_period, sink.grace_period)) if have != want]


class SinkGuardFields(TypedDict):
    """The SinkGuards fields every sink action of a table carries (passed to each action's constructor)."""

    quiet_period: int
    checkpoint: str | None
    writer_stopped_check: bool
    downstream_streaming_readers: DownstreamReaders
    grace_period: int
    latest_compact: str | None
    latest_batch: int | None


@dataclass(frozen=True, kw_only=True)
class SinkCompactAction(RewriteAction, SinkGuards):
    """Rewrite a file sink's small files listed in its latest ``.compact`` and swap them in that manifest."""

    type: ClassVar[str] = "sink_compact"

    def policy_problems(self, policy: TablePolicy) -> list[str]:
        return super().policy_problems(policy) + self.guard_problems(policy)


@dataclass(frozen=True, kw_only=True)
class SinkPruneAction(Action, SinkGuards):
    """Drop the entries older than ``retention`` from a file sink's latest ``.compact``; with ``delete_files``
    their data files go to the ledger."""

    type: ClassVar[str] = "sink_prune"
    retention: int = field(metadata={"schema": _NOT_NEGATIVE})
    horizon_ms: int
    delete_files: bool = False

    def policy_problems(self, policy: TablePolicy) -> list[str]:
        out = self.guard_problems(policy)
        s = policy.sink or Sink()
        if not (s.prune and s.retention):
            out.append("the policy does not enable manifest pruning (sink.prune with sink.retention)")
        elif self.retention != s.retention or self.delete_files != s.prune_delete_files:
            out.append(f"retention {self.retention} / delete_files {self.delete_files} is not the policy's "
                       f"{s.retention} / {s.prune_delete_files}")
        return out


@dataclass(frozen=True, kw_only=True)
class SinkDeleteReplacedAction(Action, SinkGuards):
    """Delete replaced files of a file sink's ledger (``files``) past the grace period, once no log file lists them."""

    type: ClassVar[str] = "sink_delete_replaced"
    files: tuple[str, ...] = field(default=(), metadata={"required": True})

    @property
    def input_paths(self) -> tuple[str, ...]:
        return self.files

    def check(self, live: Collection[str]) -> None:
        """The digest covers ``files`` (replaced files: not live, by design)."""
        if digest_paths(self.files) != self.precondition.digest:
            raise PlanError("the files to delete do not match the action's precondition digest: the plan was "
                            "edited after `compactor plan` wrote it", hint="re-run `compactor plan`")

    def policy_problems(self, policy: TablePolicy) -> list[str]:
        return self.guard_problems(policy)


class SinkSkipReason(StrEnum):
    """Why a file sink is left alone (besides the reasons every format shares)."""

    WRITER_ACTIVE = "writer_active"  # the writer is not stopped
    DOWNSTREAM_READERS = "downstream_readers"  # downstream streaming readers not acknowledged


register("spark_file_sink", actions=(SinkCompactAction, SinkPruneAction, SinkDeleteReplacedAction),
         skips=(SkipKind(SinkSkipReason.WRITER_ACTIVE,
                         "plan again once the streaming query has stopped (or is idle for sink.quiet_period)"),
                SkipKind(SinkSkipReason.DOWNSTREAM_READERS,
                         "check who reads the sink as a stream, then set sink.downstream_streaming_readers")))
