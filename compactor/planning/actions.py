"""Plan actions: a tagged union of frozen dataclasses, one per action type.

Every action carries the precondition it was planned under: the table version and a digest of the exact
files it replaces (listed once, in ``bins``). ``action.check(state)`` re-checks it on a fresh snapshot
before anything runs: a digest that does not match the listed files means the plan was edited
(``PlanError``); a listed file that is no longer live means the table moved on (``StalePlanError``).

In the plan file each action is one JSON object with the common fields below plus ``params`` holding
the type-specific fields (schemas/plan.schema.json).
"""

from __future__ import annotations

import hashlib
from collections.abc import Collection, Mapping
from dataclasses import dataclass, field, fields
from typing import Any, ClassVar, TypedDict

from compactor.errors import PlanError, StalePlanError


def digest_paths(paths: Collection[str]) -> str:
    # in the given order (bin order): sorting a million paths costs more than the rest of the digest
    # one join, then the newline terminating the last path: the same bytes as p + "\n" for each path
    return "sha256:" + hashlib.sha256(("\n".join(paths) + "\n").encode() if paths else b"").hexdigest()


@dataclass(frozen=True)
class Precondition:
    """What must still hold when the action runs: the table version it was planned against and the
    digest of the exact files it replaces."""

    table_version: int | None
    digest: str = ""

    @classmethod
    def of(cls, version: int | None, files: Collection[str]) -> Precondition:
        return cls(version, digest_paths(files))

    def check(self, live: Collection[str], paths: Collection[str]) -> None:
        """Raise PlanError when ``paths`` are not the files this precondition was planned with, and
        StalePlanError when one of them is no longer in ``live``."""
        self.check_digest(paths)
        gone = [p for p in paths if p not in live]
        if gone:
            raise StalePlanError(f"{len(gone)} planned input file(s) are no longer live (e.g. {gone[0]})",
                                 hint="the table changed since planning; re-plan or use --replan-stale")

    def check_digest(self, paths: Collection[str]) -> None:
        """Raise PlanError when ``paths`` are not the files this precondition was planned with."""
        if not self.digest:
            raise PlanError("the action has no precondition digest: the plan was edited after `compactor plan` "
                            "wrote it", hint="re-run `compactor plan`")
        if digest_paths(paths) != self.digest:
            raise PlanError("the action's files do not match its precondition digest: the plan was edited "
                            "after `compactor plan` wrote it", hint="re-run `compactor plan`")


Partition = Mapping[str, "str | None"]


@dataclass(frozen=True, kw_only=True)
class Action:
    """Fields common to every action (the plan file's action object minus ``params``)."""

    type: ClassVar[str]
    #: rewrites data files (rows must be preserved exactly)
    rewrites: ClassVar[bool] = False

    partition: Partition = field(default_factory=dict)
    input_files: int = 0
    input_bytes: int = 0
    expected_output_files: int = 0
    expected_output_bytes: int = 0
    rows: int | None = None
    precondition: Precondition = field(default_factory=lambda: Precondition(None))
    #: exact input files of each output file: one output per bin; their union is exactly the set of
    #: files the action replaces (paths relative to the table root for Delta, as the log names them)
    bins: tuple[tuple[str, ...], ...] = ()
    #: one line for humans: why this action exists / what the estimate assumes
    reason: str = ""

    @property
    def input_paths(self) -> tuple[str, ...]:
        """Every file this action replaces (the union of its bins)."""
        return tuple(p for b in self.bins for p in b)

    @property
    def digested_paths(self) -> tuple[str, ...]:
        """The files its precondition's digest covers: those it replaces (a vacuum: those it may delete)."""
        return self.input_paths

    def check(self, live: Collection[str]) -> None:
        self.precondition.check(live, self.input_paths)

    def params(self) -> dict[str, Any]:
        """The type-specific fields, as stored under ``params`` in the plan file."""
        return {f.name: _jsonable(getattr(self, f.name)) for f in fields(self) if f.name not in _COMMON}


_COMMON = frozenset(f.name for f in fields(Action))


def _jsonable(value: Any) -> Any:
    if isinstance(value, tuple):
        return [_jsonable(v) for v in value]
    if isinstance(value, Mapping):
        return {k: _jsonable(v) for k, v in value.items()}
    return value


@dataclass(frozen=True, kw_only=True)
class RewriteAction(Action):
    """An action that rewrites data files: each bin becomes one new file (compact, z_order, sort, sink_compact)."""

    rewrites: ClassVar[bool] = True
    strategy: ClassVar[str] = "bin_pack"

    target_file_size: int
    min_file_size: int
    #: whose bin-packing produced ``bins``: "delta-rs" or "delta-spark"
    bin_model: str = "delta-spark"
    #: spark engine: "rewrite" (Spark writes, the commit goes through delta-rs), "optimize" (native
    #: delta-spark OPTIMIZE), "auto" (rewrite, optimize where only delta-spark can do the job)
    method: str = "auto"

    def params(self) -> dict[str, Any]:
        return {**super().params(), "strategy": self.strategy}


@dataclass(frozen=True, kw_only=True)
class CompactAction(RewriteAction):
    """Bin-pack a partition's small files into files of about ``target_file_size`` (strategy bin_pack)."""

    type: ClassVar[str] = "compact"


@dataclass(frozen=True, kw_only=True)
class ZOrderAction(RewriteAction):
    """Z-order a whole partition by ``z_order_by`` (delta-rs' z-order or delta-spark's OPTIMIZE ZORDER BY)."""

    type: ClassVar[str] = "z_order"
    strategy: ClassVar[str] = "z_order"
    z_order_by: tuple[str, ...] = ()


@dataclass(frozen=True, kw_only=True)
class SortAction(RewriteAction):
    """Rewrite a whole partition with its rows sorted by ``sort_by`` (strategy sort)."""

    type: ClassVar[str] = "sort"
    strategy: ClassVar[str] = "sort"
    sort_by: tuple[str, ...] = ()


@dataclass(frozen=True, kw_only=True)
class VacuumAction(Action):
    """VACUUM a Delta table: delete files it no longer references, older than ``retention_hours``."""

    type: ClassVar[str] = "vacuum"
    retention_hours: int
    #: apply lists what the VACUUM would delete before deleting anything, and deletes nothing unless every
    #: file listed is in ``files`` (compactor/formats/delta/maintenance.py)
    dry_run_first: bool = True
    #: how many files a vacuum would delete when planned (formats/delta/vacuum_listing.py), None when unknown
    files_to_delete: int | None = None
    #: those files, relative to the table root as stored, sorted (None when they could not be listed);
    #: the precondition's digest covers them, so an edited list is an edited plan
    files: tuple[str, ...] | None = None

    @property
    def digested_paths(self) -> tuple[str, ...]:
        return self.files or ()

    def check(self, live: Collection[str]) -> None:
        """Only the digest: the files a vacuum deletes are never live (apply lists them again and the deletion
        gate proves each unreferenced right before the delete)."""
        self.precondition.check_digest(self.digested_paths)


@dataclass(frozen=True, kw_only=True)
class SetPropertiesAction(Action):
    """Set the Delta table properties its policy's retention declares (deleted-file and log retention)."""

    type: ClassVar[str] = "set_properties"
    properties: Mapping[str, str] = field(default_factory=dict)
    #: the values before (for the reviewer)
    current: Mapping[str, str | None] = field(default_factory=dict)


@dataclass(frozen=True, kw_only=True)
class SinkGuards:
    """What a file-sink action re-checks before touching the log (copied from the policy at plan time)."""

    quiet_period: int = 600
    checkpoint: str | None = None
    writer_stopped_check: bool = True
    downstream_streaming_readers: str = "unknown"
    grace_period: int = 3600
    #: the log as planned: apply refuses when the writer has written batches since
    latest_compact: str | None = None
    latest_batch: int | None = None


class SinkGuardFields(TypedDict):
    """The SinkGuards fields every sink action of a table carries (passed to each action's constructor)."""

    quiet_period: int
    checkpoint: str | None
    writer_stopped_check: bool
    downstream_streaming_readers: str
    grace_period: int
    latest_compact: str | None
    latest_batch: int | None


@dataclass(frozen=True, kw_only=True)
class SinkCompactAction(RewriteAction, SinkGuards):
    """Rewrite a file sink's small files listed in its latest ``.compact`` and swap them in that manifest."""

    type: ClassVar[str] = "sink_compact"


@dataclass(frozen=True, kw_only=True)
class SinkPruneAction(Action, SinkGuards):
    """Drop the entries older than ``retention`` from a file sink's latest ``.compact``; with ``delete_files``
    their data files go to the ledger."""

    type: ClassVar[str] = "sink_prune"
    retention: int
    horizon_ms: int
    delete_files: bool = False


@dataclass(frozen=True, kw_only=True)
class SinkDeleteReplacedAction(Action, SinkGuards):
    """Delete replaced files of a file sink's ledger (``files``) past the grace period, once no log file lists them."""

    type: ClassVar[str] = "sink_delete_replaced"
    files: tuple[str, ...] = ()

    @property
    def input_paths(self) -> tuple[str, ...]:
        return self.files

    def check(self, live: Collection[str]) -> None:
        """The digest covers ``files`` (replaced files: not live, by design)."""
        if digest_paths(self.files) != self.precondition.digest:
            raise PlanError("the files to delete do not match the action's precondition digest: the plan was "
                            "edited after `compactor plan` wrote it", hint="re-run `compactor plan`")


@dataclass(frozen=True, kw_only=True)
class RepairAction(Action):
    """Take out the extra copy of rows another writer's (or a stale) commit made live twice: remove
    ``remove`` (live) and bring back ``restore`` (removed; re-added, or copied under a new name when VACUUM
    may already delete it) in one dataChange=false commit, proved on the files' contents first
    (formats/delta/repair.py). Listed first in its table's actions; apply re-derives it from the log and
    runs it only when the derived repair is this one."""

    type: ClassVar[str] = "repair"
    #: the versions of the commits that made rows live twice
    anomalies: tuple[int, ...]
    #: every commit the repair reverts (the anomalies and the rewrites of their files since)
    chain: tuple[int, ...] = ()
    remove: tuple[str, ...] = ()
    restore: tuple[str, ...] = ()
    #: the first version of the log window it was derived from (apply reads the same window)
    window_start: int | None = None
    #: rows of the files removed and restored (the log's numRecords; apply proves them on the files)
    rows_removed: int | None = None
    rows_restored: int | None = None

    @property
    def input_paths(self) -> tuple[str, ...]:
        return (*self.remove, *self.restore)

    def check(self, live: Collection[str]) -> None:
        """The digest covers remove then restore; what it removes must be live, what it restores not."""
        if digest_paths(self.input_paths) != self.precondition.digest:
            raise PlanError("the repair's files do not match its precondition digest: the plan was edited "
                            "after `compactor plan` wrote it", hint="re-run `compactor plan`")
        gone = [p for p in self.remove if p not in live]
        back = [p for p in self.restore if p in live]
        if gone or back:
            raise StalePlanError(f"the table changed where the repair works ({len(gone)} file(s) to remove no longer "
                                 f"live, {len(back)} to restore live again)", hint="re-run `compactor plan`")


ACTION_TYPES: dict[str, type[Action]] = {c.type: c for c in (
    CompactAction, ZOrderAction, SortAction, VacuumAction, SetPropertiesAction, SinkCompactAction,
    SinkPruneAction, SinkDeleteReplacedAction, RepairAction)}
#: actions that rewrite data files (and so must preserve rows exactly)
REWRITE_ACTIONS = frozenset(t for t, c in ACTION_TYPES.items() if c.rewrites)
#: param keys that are derived, not stored fields
_DERIVED_PARAMS = frozenset({"strategy"})


def action_to_dict(a: Action) -> dict[str, Any]:
    # built by hand: dataclasses.asdict deep-copies every path string, which dominates large plans
    return {
        "type": a.type, "partition": dict(a.partition), "input_files": a.input_files,
        "input_bytes": a.input_bytes, "expected_output_files": a.expected_output_files,
        "expected_output_bytes": a.expected_output_bytes, "rows": a.rows,
        "precondition": {"table_version": a.precondition.table_version, "digest": a.precondition.digest},
        "bins": [list(b) for b in a.bins], "params": a.params(), "reason": a.reason,
    }


def action_from_dict(d: Mapping[str, Any]) -> Action:
    """Inverse of action_to_dict; raises PlanError naming an unknown type or parameter."""
    cls = ACTION_TYPES.get(d.get("type", ""))
    if cls is None:
        raise PlanError(f"unknown action type {d.get('type')!r} (known: {', '.join(ACTION_TYPES)})")
    own = {f.name: f for f in fields(cls) if f.name not in _COMMON}
    params = dict(d.get("params") or {})
    unknown = sorted(set(params) - set(own) - _DERIVED_PARAMS)
    if unknown:
        raise PlanError(f"{cls.type} action has unknown parameter(s) {', '.join(unknown)}")
    typed = {k: tuple(v) if isinstance(v, list) else v for k, v in params.items() if k in own}
    pre = d.get("precondition") or {}
    try:
        return cls(
            partition=dict(d.get("partition") or {}),
            input_files=int(d.get("input_files", 0)), input_bytes=int(d.get("input_bytes", 0)),
            expected_output_files=int(d.get("expected_output_files", 0)),
            expected_output_bytes=int(d.get("expected_output_bytes", 0)), rows=d.get("rows"),
            precondition=Precondition(pre.get("table_version"), pre.get("digest", "")),
            bins=tuple(tuple(b) for b in d.get("bins") or ()), reason=d.get("reason", ""), **typed,
        )
    except TypeError as e:  # a required parameter is missing
        raise PlanError(f"{cls.type} action: {e}") from None
