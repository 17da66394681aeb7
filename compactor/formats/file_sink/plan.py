"""Plan a file-sink output (PURE): compaction only among files listed in the latest .compact, guarded.

The state carries what the guards and the deletions need (read by state.py): the newest log and
checkpoint mtimes and the ledger of replaced files."""

from __future__ import annotations

import datetime as dt
from dataclasses import replace

import pyarrow as pa
import pyarrow.compute as pc

from compactor.formats.file_sink.actions import (
    SinkCompactAction,
    SinkDeleteReplacedAction,
    SinkGuardFields,
    SinkGuards,
    SinkPruneAction,
    SinkSkipReason,
)
from compactor.formats.file_sink.state import sink_facts
from compactor.models.state import TableState
from compactor.planning.actions import Action, Precondition
from compactor.planning.partitions import plan_partitions
from compactor.planning.plan import Skip, SkipReason, TablePlan
from compactor.policy.model import Sink, TablePolicy

#: why the small files of a partition that are all newer than the latest .compact are left alone
NOT_IN_COMPACT = ("its small files were written after the latest .compact manifest; only files a .compact lists "
                  "are rewritten: the writer's next .compact lists them")


def writer_guard(guards: Sink | SinkGuards, state: TableState, now: dt.datetime) -> str | None:
    """A reason the writer may still be running, or None."""
    if not guards.writer_stopped_check:
        return None
    now_ms = int(now.timestamp() * 1000)
    facts = sink_facts(state)
    newest = facts.newest_log_mtime_ms
    if newest is not None and now_ms - newest < guards.quiet_period * 1000:
        return (f"the newest sink log file is {(now_ms - newest) // 1000}s old, younger than the quiet period "
                f"({guards.quiet_period}s): the streaming query may still be running")
    cp = facts.checkpoint_newest_mtime_ms
    if guards.checkpoint and cp is not None and now_ms - cp < guards.quiet_period * 1000:
        return f"the checkpoint {guards.checkpoint} has commits from {(now_ms - cp) // 1000}s ago"
    return None


def readers_guard(sink: Sink | SinkGuards) -> str | None:
    if sink.downstream_streaming_readers == "unknown":
        return ("downstream streaming readers are not acknowledged: a readStream of this directory would "
                "re-read the compacted rows (set sink.downstream_streaming_readers: none or reprocess_ok)")
    return None


def sink_guards(policy: TablePolicy, state: TableState) -> SinkGuardFields:
    """The SinkGuards fields of every sink action of this table."""
    s = policy.sink or Sink()
    return SinkGuardFields(quiet_period=s.quiet_period, checkpoint=s.checkpoint,
                           writer_stopped_check=s.writer_stopped_check,
                           downstream_streaming_readers=s.downstream_streaming_readers, grace_period=s.grace_period,
                           latest_compact=sink_facts(state).latest_compact, latest_batch=sink_facts(state).latest_batch)


def plan_sink_table(policy: TablePolicy, state: TableState, *, now: dt.datetime, engine: str) -> TablePlan:
    sink = policy.sink or Sink()
    base = TablePlan(name=policy.name, path=state.uri, format="spark_file_sink", engine=engine, version=state.version,
                bin_model="delta-spark", partition_columns=state.partition_columns, files_before=state.file_count,
                bytes_before=state.total_bytes, policy_source=str(policy.source))
    if not policy.enabled:
        return replace(base, files_after=state.file_count, skipped=(Skip(SkipReason.DISABLED, None, {}, "enabled: false"),))
    actions: list[Action] = []
    skips: list[Skip] = []
    guards = sink_guards(policy, state)
    deletions = _due_deletions(state, sink, now)
    if deletions:
        actions.append(SinkDeleteReplacedAction(
            input_files=len(deletions), precondition=Precondition.of(state.version, deletions), files=tuple(deletions), **guards,
            reason=f"delete {len(deletions)} replaced file(s) past the {sink.grace_period}s grace period"))
    guard = writer_guard(sink, state, now) or readers_guard(sink)
    if guard:
        reason = SinkSkipReason.WRITER_ACTIVE if writer_guard(sink, state, now) else SinkSkipReason.DOWNSTREAM_READERS
        skips.append(Skip(reason, None, {"latest_batch": sink_facts(state).latest_batch}, guard))
    elif not sink_facts(state).latest_compact:
        skips.append(Skip(SkipReason.ALREADY_COMPACT, None, {}, "no .compact manifest yet: nothing is safe to rewrite"))
    else:
        eligible = state.files.column("in_compact")
        prune = _prune_action(policy, state, now)
        if prune is not None:
            actions.append(prune)
            pruned = pa.array([p in set(prune.input_paths) for p in state.files.column("path").to_pylist()])
            eligible = pc.and_(eligible, pc.invert(pruned))  # never compact what is being pruned
        if policy.compaction.enabled:
            c = policy.compaction
            template = SinkCompactAction(target_file_size=c.target_file_size, min_file_size=c.min_file_size,
                                         method=c.method, **guards)
            acts, sk = plan_partitions(state.files, state.partition_columns, c, now=now,
                                       bin_model="delta-spark", version=state.version, eligible=eligible,
                                       template=template, ineligible=(SkipReason.ALREADY_COMPACT, NOT_IN_COMPACT))
            actions += [replace(a, reason=a.reason + " (files listed in the latest .compact only)") for a in acts]
            skips += sk
    removed = sum(a.input_files - a.expected_output_files for a in actions if a.rewrites)
    return replace(base, actions=tuple(actions), skipped=tuple(skips), files_after=state.file_count - removed)


def _prune_action(policy: TablePolicy, state: TableState, now: dt.datetime) -> Action | None:
    """Offline manifest retention: drop entries of the latest .compact older than sink.retention."""
    sink = policy.sink or Sink()
    if not (sink.prune and sink.retention):
        return None
    horizon_ms = int((now.timestamp() - sink.retention) * 1000)
    f = state.files
    old = pc.and_(f.column("in_compact"), pc.less(f.column("modification_time"), horizon_ms))
    paths = tuple(f.filter(old).column("path").to_pylist())
    if not paths:
        return None
    size = int(pc.sum(f.filter(old).column("size_bytes")).as_py() or 0)
    return SinkPruneAction(input_files=len(paths), input_bytes=size, bins=(paths,),
                           precondition=Precondition.of(state.version, paths), **sink_guards(policy, state),
                           retention=sink.retention, horizon_ms=horizon_ms, delete_files=sink.prune_delete_files,
                           reason=f"drop {len(paths)} manifest entries older than the {sink.retention}s retention"
                         + (" (data files deleted after the grace period)" if sink.prune_delete_files else ""))


def _due_deletions(state: TableState, sink: Sink, now: dt.datetime) -> list[str]:
    horizon = now.timestamp() - sink.grace_period
    return sorted(e.file for e in sink_facts(state).ledger
                  if (now.timestamp() if e.replaced_at is None else e.replaced_at) <= horizon)
