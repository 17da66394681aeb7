"""Run results (schemas/run_results.schema.json): what apply did, per action."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import asdict, dataclass, field
from typing import Any, Literal

RUN_RESULTS_SCHEMA_VERSION = 1
#: action types that rewrite data files (planning/actions.py REWRITE_ACTIONS; a test keeps them equal)
REWRITE_TYPES = frozenset({"compact", "z_order", "sort", "sink_compact"})

Status = Literal["success", "skipped", "stale", "error", "verification_failed"]


@dataclass
class ActionResult:
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
    #: extra facts: repaired concurrent commit, files a dry-run vacuum would delete, ...
    details: Mapping[str, Any] = field(default_factory=dict)


@dataclass
class RunTotals:
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
    results: list[ActionResult] = field(default_factory=list)
    totals: RunTotals = field(default_factory=RunTotals)
    schema_version: int = RUN_RESULTS_SCHEMA_VERSION

    @property
    def ok(self) -> bool:
        return all(r.status in ("success", "skipped", "stale") for r in self.results)

    def to_dict(self) -> dict[str, Any]:
        d = asdict(self)
        return {"schema_version": d.pop("schema_version"), **d}

    @classmethod
    def from_dict(cls, d: Mapping[str, Any]) -> RunResults:
        d = dict(d)
        results = [ActionResult(**r) for r in d.pop("results", [])]
        totals = RunTotals(**d.pop("totals", {}))
        return cls(results=results, totals=totals, **d)


def compute_run_totals(results: list[ActionResult]) -> RunTotals:
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
        if r.status == "success" and r.type in REWRITE_TYPES:
            t.bytes_rewritten += r.bytes_removed
        t.duration_s += r.duration_s
    return t
