"""Plan actions: a tagged union of frozen dataclasses, one per action type.

Every action carries the precondition it was planned under: the table version and a digest of the exact
files it replaces (listed once, in ``bins``). ``action.check(state)`` re-checks it on a fresh snapshot
before anything runs: a digest that does not match the listed files means the plan was edited
(``PlanError``); a listed file that is no longer live means the table moved on (``StalePlanError``).

Each action type owns its rules: what apply re-derives from the policy before running it
(``policy_problems``), whether a dry run runs it (``runs_in_dry_run``), its line in the plan text (``row``)
and its part of the plan schema (``params_schema``, generated from its fields). The rewrites every format
shares (compact, z_order, sort) are here; a format's own actions live in its folder and register through
its registry entry (planning/vocabulary.py).

In the plan file each action is one JSON object with the common fields below plus ``params`` holding
the type-specific fields (schemas/plan.schema.json).
"""

from __future__ import annotations

import hashlib
from collections.abc import Collection, Mapping
from dataclasses import dataclass, field, fields, replace
from typing import TYPE_CHECKING, Any, ClassVar

from compactor.errors import PlanError, StalePlanError
from compactor.planning.action_schema import params_schema
from compactor.planning.bins import BIN_MODELS
from compactor.policy.model import Compaction, Method, Strategy, TablePolicy, Triggers
from compactor.units import format_size

if TYPE_CHECKING:  # pragma: no cover
    from compactor.planning.blockers import Blocker


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


def partition_label(partition: Partition | None) -> str:
    """``date=2024-01-01/country=DE`` (``(table)`` for the whole table), as the plan text names a partition."""
    if not partition:
        return "(table)"
    return "/".join(f"{k}={v if v is not None else 'null'}" for k, v in partition.items())


@dataclass(frozen=True)
class ActionRow:
    """An action's line in the plan text, after its type: where, how many files, how many bytes, and one
    detail (rows, or what the action sets)."""

    partition: str
    files: str
    bytes: str
    detail: str = ""


@dataclass(frozen=True, kw_only=True)
class Action:
    """Fields common to every action (the plan file's action object minus ``params``)."""

    type: ClassVar[str]
    #: rewrites data files (rows must be preserved exactly)
    rewrites: ClassVar[bool] = False
    #: a dry run (`apply --dry-run`) runs it (writing nothing: it lists what it would do); others are only
    #: checked and reported
    runs_in_dry_run: ClassVar[bool] = False
    #: the files it lists are the table's own metadata files, which the format's library rewrites (the
    #: plan's check that no action names a file of the table's log does not apply to them; the format checks
    #: at apply that they are exactly what the planned version held)
    lists_metadata: ClassVar[bool] = False

    partition: Partition = field(default_factory=dict)
    input_files: int = 0
    input_bytes: int = 0
    expected_output_files: int = 0
    expected_output_bytes: int = 0
    rows: int | None = None
    precondition: Precondition = field(default_factory=lambda: Precondition(None))
    #: exact input files of each output file: one output per bin; their union is exactly the set of
    #: files the action replaces (paths relative to the table root as the format's log names them)
    bins: tuple[tuple[str, ...], ...] = ()
    #: one line for humans: why this action exists / what the estimate assumes
    reason: str = ""

    @property
    def input_paths(self) -> tuple[str, ...]:
        """Every file this action replaces (the union of its bins)."""
        return tuple(p for b in self.bins for p in b)

    @property
    def digested_paths(self) -> tuple[str, ...]:
        """The files its precondition's digest covers: those it replaces (or deletes)."""
        return self.input_paths

    def check(self, live: Collection[str]) -> None:
        self.precondition.check(live, self.input_paths)

    def params(self) -> dict[str, Any]:
        """The type-specific fields, as stored under ``params`` in the plan file."""
        return {f.name: _jsonable(getattr(self, f.name)) for f in fields(self) if f.name not in COMMON_FIELDS}

    @classmethod
    def params_schema(cls) -> dict[str, Any]:
        """The JSON Schema of ``params`` (the plan schema's fragment for this type, generated from its fields)."""
        return params_schema(cls, COMMON_FIELDS, derived=cls.derived_params())

    @classmethod
    def derived_params(cls) -> dict[str, Any]:
        """Params written beside the fields (derived from the type), with their JSON Schema."""
        return {}

    def policy_problems(self, policy: TablePolicy) -> list[str]:
        """What in this action the table's policy would not produce (apply re-derives it before running the
        plan). A type that does not say is refused: apply runs no action it cannot check."""
        return [f"apply does not know how to check a {self.type} action"]

    def row(self) -> ActionRow:
        """Its line in the plan text."""
        return ActionRow(partition_label(self.partition), f"{self.input_files} -> {self.expected_output_files}",
                         format_size(self.input_bytes))

    def answers(self, blocker: Blocker) -> bool:
        """Whether running this action answers ``blocker`` (planning/blockers.py): apply refuses a table with
        a blocker no planned action answers."""
        return False


#: the fields every action has (the plan file's action object minus ``params``)
COMMON_FIELDS = frozenset(f.name for f in fields(Action))


def _jsonable(value: Any) -> Any:
    if isinstance(value, tuple):
        return [_jsonable(v) for v in value]
    if isinstance(value, Mapping):
        return {k: _jsonable(v) for k, v in value.items()}
    return value


_STRATEGY_ENUM = {"enum": ["bin_pack", "z_order", "sort"]}


@dataclass(frozen=True, kw_only=True)
class RewriteAction(Action):
    """An action that rewrites data files: each bin becomes one new file (compact, z_order, sort and the
    formats' own rewrites)."""

    rewrites: ClassVar[bool] = True
    strategy: ClassVar[Strategy] = "bin_pack"

    target_file_size: int = field(metadata={"schema": {"minimum": 1}, "required": True})
    min_file_size: int = field(metadata={"schema": {"minimum": 1}, "required": True})
    #: whose bin-packing produced ``bins`` (planning/bins.py BIN_MODELS)
    bin_model: str = field(default=BIN_MODELS[0], metadata={"schema": {"enum": list(BIN_MODELS)}})
    #: spark engine: "rewrite" (Spark writes, compactor commits), "optimize" (the format's native
    #: OPTIMIZE), "auto" (rewrite, optimize where only the native one can do the job)
    method: Method = "auto"
    #: the policy's ``compaction.triggers.max_deleted_rows_ratio`` its candidates were chosen with (None: the
    #: format's default); a native compaction runs with it
    max_deleted_rows_ratio: float | None = field(default=None, metadata={"schema": {"exclusiveMinimum": 0,
                                                                                    "maximum": 1}})

    def params(self) -> dict[str, Any]:
        out = {**super().params(), "strategy": self.strategy}
        if out.get("max_deleted_rows_ratio") is None:  # the format's default: written as plans before it were
            out.pop("max_deleted_rows_ratio", None)
        return out

    @classmethod
    def derived_params(cls) -> dict[str, Any]:
        return {"strategy": _STRATEGY_ENUM}

    def row(self) -> ActionRow:
        return replace(super().row(), detail="-" if self.rows is None else f"{self.rows:,}")

    def compaction(self) -> Compaction:
        """The compaction settings it was planned with (`apply --replan-stale` plans its partition again)."""
        return Compaction(strategy=self.strategy, target_file_size=self.target_file_size,
                          min_file_size=self.min_file_size, method=self.method,
                          triggers=Triggers(min_input_files=2, max_deleted_rows_ratio=self.max_deleted_rows_ratio))

    def policy_problems(self, policy: TablePolicy) -> list[str]:
        c = policy.compaction
        out = []
        if not c.enabled or not policy.enabled:
            out.append("the policy does not enable compaction")
        if self.strategy != c.strategy:
            out.append(f"a {self.type} action, but the policy's strategy is {c.strategy}")
        for k, have, want in (("target_file_size", self.target_file_size, c.target_file_size),
                              ("min_file_size", self.min_file_size, c.min_file_size), ("method", self.method, c.method)):
            if have != want:
                out.append(f"{k} {have!r} is not the policy's {want!r}")
        ratio = c.triggers.max_deleted_rows_ratio
        if self.max_deleted_rows_ratio is not None and self.max_deleted_rows_ratio != ratio:
            out.append(f"max_deleted_rows_ratio {self.max_deleted_rows_ratio!r} is not the policy's {ratio!r}")
        return out


@dataclass(frozen=True, kw_only=True)
class CompactAction(RewriteAction):
    """Bin-pack a partition's small files into files of about ``target_file_size`` (strategy bin_pack)."""

    type: ClassVar[str] = "compact"


@dataclass(frozen=True, kw_only=True)
class ZOrderAction(RewriteAction):
    """Z-order a whole partition by ``z_order_by`` (the format's z-order on either engine)."""

    type: ClassVar[str] = "z_order"
    strategy: ClassVar[Strategy] = "z_order"
    z_order_by: tuple[str, ...] = field(default=(), metadata={"schema": {"minItems": 1}, "required": True})

    def compaction(self) -> Compaction:
        return replace(super().compaction(), z_order_by=self.z_order_by)

    def policy_problems(self, policy: TablePolicy) -> list[str]:
        want = tuple(policy.compaction.z_order_by)
        return super().policy_problems(policy) + (
            [] if tuple(self.z_order_by) == want else [f"z_order_by {list(self.z_order_by)} is not the policy's {list(want)}"])


@dataclass(frozen=True, kw_only=True)
class SortAction(RewriteAction):
    """Rewrite a whole partition with its rows sorted by ``sort_by`` (strategy sort)."""

    type: ClassVar[str] = "sort"
    strategy: ClassVar[Strategy] = "sort"
    sort_by: tuple[str, ...] = field(default=(), metadata={"schema": {"minItems": 1}, "required": True})

    def compaction(self) -> Compaction:
        return replace(super().compaction(), sort_by=self.sort_by)

    def policy_problems(self, policy: TablePolicy) -> list[str]:
        want = tuple(policy.compaction.sort_by)
        return super().policy_problems(policy) + (
            [] if tuple(self.sort_by) == want else [f"sort_by {list(self.sort_by)} is not the policy's {list(want)}"])


#: the actions every format may run (a format's own register through planning/vocabulary.py)
SHARED_ACTIONS: tuple[type[Action], ...] = (CompactAction, ZOrderAction, SortAction)


def action_to_dict(a: Action) -> dict[str, Any]:
    # built by hand: dataclasses.asdict deep-copies every path string, which dominates large plans
    return {
        "type": a.type, "partition": dict(a.partition), "input_files": a.input_files,
        "input_bytes": a.input_bytes, "expected_output_files": a.expected_output_files,
        "expected_output_bytes": a.expected_output_bytes, "rows": a.rows,
        "precondition": {"table_version": a.precondition.table_version, "digest": a.precondition.digest},
        "bins": [list(b) for b in a.bins], "params": a.params(), "reason": a.reason,
    }


def action_from_dict(cls: type[Action], d: Mapping[str, Any]) -> Action:
    """Inverse of action_to_dict for an action of type ``cls``; raises PlanError naming an unknown or
    missing parameter."""
    own = {f.name: f for f in fields(cls) if f.name not in COMMON_FIELDS}
    params = dict(d.get("params") or {})
    unknown = sorted(set(params) - set(own) - set(cls.derived_params()))
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
