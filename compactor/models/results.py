"""Run results (schemas/run_results.schema.json): what apply did, per action."""

from __future__ import annotations

from collections.abc import Collection, Mapping
from dataclasses import asdict, dataclass, field, fields, replace
from typing import Any, Literal

RUN_RESULTS_SCHEMA_VERSION = 1

Status = Literal["success", "skipped", "stale", "error", "verification_failed"]
Interruption = Literal["after_group", "at_once"]


@dataclass
class CommitReverted:
    """compactor reverted its own commit: a concurrent commit removed the same inputs (the format's overlap
    guard)."""

    overlapping_removes: int
    repair_version: int
    conflicting_versions: list[int]


@dataclass
class DuplicateFound:
    """A later commit removed files this action had already rewritten (the post-commit watch)."""

    found_by: str
    conflicting_versions: list[int]


@dataclass
class ActionDetails:
    """What an action did beyond the counts (run_results.json ``details``: only the fields set are written)."""

    #: how a rewrite ran: "rewrite" (compactor's pipeline) or the format's own statement (e.g. "native OPTIMIZE")
    method: str | None = None
    #: actions sharing this action's commit
    commit_group: int | None = None
    bins: int | None = None
    #: the SQL statement that ran (a format's own rewrite or maintenance)
    sql: str | None = None
    note: str | None = None
    dry_run: bool | None = None
    #: a dry run: the files the action would rewrite, and the files it would write instead
    would_rewrite_files: int | None = None
    would_write_files: int | None = None
    replanned: bool | None = None
    max_runtime: bool | None = None
    #: a deletion of unreferenced files: the files deleted (or a dry run would delete), at most 1000, how many
    #: in all, and by which engine
    files: list[str] | None = None
    file_count: int | None = None
    engine: str | None = None
    #: such a deletion: listed files the deletion gate kept (runtime/deletion.py), each with why, at most 1000
    kept: Mapping[str, str] | None = None
    #: a format's expiry of old table versions: the versions (snapshot ids) it removed from the table's metadata
    snapshots: list[int] | None = None
    #: the table properties a format set
    properties: Mapping[str, str] | None = None
    #: a format that keeps a manifest: the manifest written, entries pruned, replaced files deleted or still listed
    manifest: str | None = None
    pruned: int | None = None
    deleted: int | None = None
    still_referenced: int | None = None
    repaired: CommitReverted | None = None
    duplicated_later: DuplicateFound | None = None
    #: a planned repair: its result as JSON (the format's ``RepairOutcome.to_dict``)
    repair: Mapping[str, Any] | None = None

    def to_dict(self) -> dict[str, Any]:
        return {f.name: asdict(v) if isinstance(v := getattr(self, f.name), CommitReverted | DuplicateFound) else v
                for f in fields(self) if getattr(self, f.name) is not None}

    @classmethod
    def from_dict(cls, d: Mapping[str, Any]) -> ActionDetails:
        """Details as run_results.json holds them (keys of older versions are dropped)."""
        known = {f.name for f in fields(cls)}
        kw = {k: v for k, v in d.items() if k in known}
        if isinstance(kw.get("commit_group"), bool):  # written as true by compactor <= 0.x for OPTIMIZE groups
            kw["commit_group"] = None
        if isinstance(kw.get("repaired"), Mapping):
            kw["repaired"] = CommitReverted(**kw["repaired"])
        if isinstance(kw.get("duplicated_later"), Mapping):
            kw["duplicated_later"] = DuplicateFound(**kw["duplicated_later"])
        return cls(**kw)


@dataclass
class ActionOutcome:
    """What a format reports for one action it ran; ``ActionResult.record`` makes it the run's record."""

    files_removed: int = 0
    files_added: int = 0
    bytes_removed: int = 0
    bytes_added: int = 0
    #: rows of the removed and of the added files (from parquet footers, checked before committing)
    rows_removed: int | None = None
    rows_added: int | None = None
    version_before: int | None = None
    version_after: int | None = None
    #: paths this action removed and added (as the log names them)
    removed_paths: tuple[str, ...] = ()
    added_paths: tuple[str, ...] = ()
    details: ActionDetails = field(default_factory=ActionDetails)


@dataclass
class ActionResult:
    """What apply did for one action of the plan (one entry of run_results.json ``results``)."""

    table: str
    type: str
    partition: Mapping[str, str | None] = field(default_factory=dict)
    status: Status = "success"
    files_removed: int = 0
    files_added: int = 0
    bytes_removed: int = 0
    bytes_added: int = 0
    rows_before: int | None = None
    rows_after: int | None = None
    table_version_before: int | None = None
    table_version_after: int | None = None
    duration_s: float = 0.0
    error: str | None = None
    #: extra facts: repaired concurrent commit, files a dry run would delete, ...
    details: ActionDetails = field(default_factory=ActionDetails)

    def record(self, o: ActionOutcome) -> None:
        """Take the format's outcome into this record: the counts, the rows from the footers (the planned
        rows stay when the format could not count them), the versions, and the details the format reports
        over the ones apply set (replanned, commit group)."""
        self.files_removed, self.files_added = o.files_removed, o.files_added
        self.bytes_removed, self.bytes_added = o.bytes_removed, o.bytes_added
        if o.rows_removed is not None:
            self.rows_before = o.rows_removed
        self.rows_after = o.rows_added
        if o.version_before is not None:
            self.table_version_before = o.version_before
        self.table_version_after = o.version_after
        self.details = replace(self.details, **{f.name: getattr(o.details, f.name) for f in fields(o.details)
                                                if getattr(o.details, f.name) is not None})


@dataclass
class RunTotals:
    """The run's counts over all its actions (run_results.json ``totals``)."""

    actions: int = 0
    succeeded: int = 0
    skipped: int = 0
    stale: int = 0
    errors: int = 0
    verification_failed: int = 0
    files_removed: int = 0
    files_added: int = 0
    bytes_rewritten: int = 0
    duration_s: float = 0.0


@dataclass
class RunResults:
    """One apply run (run_results.json): where and with what it ran, and every action's result."""

    run_id: str
    compactor_version: str
    started_at: str
    finished_at: str
    engine: str
    engine_versions: Mapping[str, str]
    target: Mapping[str, Any]
    plan_generated_at: str | None = None
    plan_file: str | None = None
    dry_run: bool = False
    #: the digest of the saved plan the run applied (None: a plan made by the apply itself)
    plan_digest: str | None = None
    #: the run was stopped by Ctrl-C: "after_group" (the first Ctrl-C: the commit group under way finished and
    #: is recorded, nothing else started), "at_once" (a second Ctrl-C: a group under way may have committed
    #: unrecorded); its results hold what it committed before. None: not interrupted
    interrupted: Interruption | None = None
    results: list[ActionResult] = field(default_factory=list)
    totals: RunTotals = field(default_factory=RunTotals)
    schema_version: int = RUN_RESULTS_SCHEMA_VERSION

    @property
    def ok(self) -> bool:
        return all(r.status in ("success", "skipped", "stale") for r in self.results)

    def to_dict(self) -> dict[str, Any]:
        d = asdict(self)
        for r, out in zip(self.results, d["results"]):
            out["details"] = r.details.to_dict()
        return {"schema_version": d.pop("schema_version"), **d}

    @classmethod
    def from_dict(cls, d: Mapping[str, Any]) -> RunResults:
        d = dict(d)
        results = [ActionResult(**{**r, "details": ActionDetails.from_dict(r.get("details") or {})})
                   for r in d.pop("results", [])]
        totals = RunTotals(**d.pop("totals", {}))
        return cls(results=results, totals=totals, **d)


def compute_run_totals(results: list[ActionResult], rewrite_types: Collection[str]) -> RunTotals:
    """The run's counts; ``rewrite_types``: the action types whose removed bytes were rewritten
    (planning/vocabulary.py rewrite_types)."""
    t = RunTotals(actions=len(results))
    for r in results:
        if r.status == "success":
            t.succeeded += 1
        elif r.status == "skipped":
            t.skipped += 1
        elif r.status == "stale":
            t.stale += 1
        elif r.status == "error":
            t.errors += 1
        elif r.status == "verification_failed":
            t.verification_failed += 1
        t.files_removed += r.files_removed
        t.files_added += r.files_added
        if r.status == "success" and r.type in rewrite_types:
            t.bytes_rewritten += r.bytes_removed
        t.duration_s += r.duration_s
    return t
