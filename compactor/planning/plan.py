"""The plan artifact: frozen, versioned, serialisable data (schemas/plan.schema.json).

A plan is a list of table plans; each holds actions (a tagged union by ``type``, planning/actions.py and
each format's own), explicit skips with reason codes, and the blockers its format found (apply refuses a
table while one is unanswered). Every action carries the precondition it was planned under (table version
and the exact files it replaces), which apply checks again before running it. The plan as a whole carries
a digest of its own content, so apply can tell a plan as `compactor plan` wrote it from an edited one.

Schema version 2 (blockers) is written; version 1 (where a format kept its blockers in a field of its own,
which it reads back as blockers: ``BlockerKind.from_v1``) still loads, its digest over the file as written.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Iterator, Mapping
from dataclasses import asdict, dataclass, field
from typing import Any

import orjson

from compactor.errors import PlanError
from compactor.models.table import TableIdentifier
from compactor.planning.actions import (
    Action,
    Precondition,
    action_from_dict,
    action_to_dict,
    digest_paths,
)
from compactor.planning.bins import BIN_MODELS
from compactor.planning.blockers import Blocker
from compactor.planning.skips import Skip, SkipDetail, SkipReason
from compactor.planning.vocabulary import action_class, blocker_kinds, load_format, skip_reason

__all__ = ["SCHEMA_VERSION", "SCHEMA_VERSIONS", "Action", "Blocker", "Precondition", "digest_paths", "Skip",
           "SkipDetail", "SkipReason", "TablePlan", "Totals", "Plan", "compute_totals", "plan_to_dict",
           "plan_from_dict", "plan_digest"]

#: the plan file's schema version compactor writes, and every version it reads
SCHEMA_VERSION = 2
SCHEMA_VERSIONS = (1, 2)


@dataclass(frozen=True)
class TablePlan:
    """One table's plan: its actions, its skips with their reasons, and its files before and after."""

    name: str
    path: str
    format: str
    engine: str
    version: int | None
    #: whose bin-packing the estimate models (planning/bins.py BIN_MODELS)
    bin_model: str = BIN_MODELS[0]
    partition_columns: tuple[str, ...] = ()
    actions: tuple[Action, ...] = ()
    skipped: tuple[Skip, ...] = ()
    files_before: int = 0
    files_after: int = 0
    bytes_before: int = 0
    #: set when the table could not be planned (then actions is empty and skipped has "unreadable")
    error: str | None = None
    #: policy source (file:line) for traceability
    policy_source: str | None = None
    #: the table's identity when it was planned, as its format states it: apply refuses another table at the path
    table_id: str | None = None
    #: the table's name in a catalog of the target, for a table a catalog located (apply hands it to the
    #: format with that catalog's settings: compactor/models/table.py); None: a table known by its path
    identifier: TableIdentifier | None = None
    #: what makes apply refuse this table until a planned action answers it (the format found them);
    #: ``plan`` and ``apply`` exit 1 while any is unanswered
    blockers: tuple[Blocker, ...] = ()

    def answered(self, blocker: Blocker) -> bool:
        """Whether the planned action ``blocker`` names answers it."""
        i = blocker.answered_by
        return i is not None and 0 <= i < len(self.actions) and self.actions[i].answers(blocker)

    @property
    def unanswered(self) -> list[Blocker]:
        """The blockers no planned action answers: apply leaves the table alone."""
        return [b for b in self.blockers if not self.answered(b)]


@dataclass(frozen=True)
class Totals:
    """The plan's counts over all its tables (``compute_totals``)."""

    tables: int = 0
    actions: int = 0
    files_before: int = 0
    files_after: int = 0
    bytes_to_rewrite: int = 0
    #: estimated work: bytes read + bytes written
    estimated_io_bytes: int = 0
    skipped: int = 0
    errors: int = 0
    #: tables with a blocker no planned action answers
    blocked: int = 0


@dataclass(frozen=True)
class Plan:
    """The plan artifact: the table plans, their totals, and what produced them."""

    compactor_version: str
    generated_at: str  # ISO 8601 UTC
    project: str
    target: Mapping[str, Any]  # Target.redacted()
    tables: tuple[TablePlan, ...] = ()
    totals: Totals = field(default_factory=Totals)
    #: the schema version it was read as (plan_to_dict always writes SCHEMA_VERSION)
    schema_version: int = SCHEMA_VERSION
    #: selection and vars used (for reproducing the plan)
    invocation: Mapping[str, Any] = field(default_factory=dict)
    #: sha256 of the plan's content as written (plan_digest); "" for a plan not read from a file
    digest: str = ""

    @property
    def has_changes(self) -> bool:
        return any(t.actions or t.blockers for t in self.tables)


def compute_totals(tables: tuple[TablePlan, ...] | list[TablePlan]) -> Totals:
    rewrite_bytes = 0
    io = 0
    for t in tables:
        for a in t.actions:
            if a.rewrites:
                rewrite_bytes += a.input_bytes
                io += a.input_bytes + a.expected_output_bytes
    return Totals(
        tables=len(tables),
        actions=sum(len(t.actions) for t in tables),
        files_before=sum(t.files_before for t in tables),
        files_after=sum(t.files_after for t in tables),
        bytes_to_rewrite=rewrite_bytes,
        estimated_io_bytes=io,
        skipped=sum(len(t.skipped) for t in tables),
        errors=sum(1 for t in tables if t.error),
        blocked=sum(1 for t in tables if t.unanswered),
    )


# ---------------------------------------------------------------- serialisation


def plan_to_dict(plan: Plan) -> dict[str, Any]:
    tables = []
    for t in plan.tables:
        tables.append({
            "name": t.name, "path": t.path, "format": t.format, "engine": t.engine, "version": t.version,
            "bin_model": t.bin_model, "partition_columns": list(t.partition_columns),
            "actions": [action_to_dict(a) for a in t.actions],
            "skipped": [asdict(s) for s in t.skipped],
            "files_before": t.files_before, "files_after": t.files_after, "bytes_before": t.bytes_before,
            "error": t.error, "policy_source": t.policy_source,
            **({"table_id": t.table_id} if t.table_id is not None else {}),
            **({"identifier": t.identifier.to_dict()} if t.identifier is not None else {}),
            **({"blockers": [b.to_dict() for b in t.blockers]} if t.blockers else {}),
        })
    return {"schema_version": SCHEMA_VERSION, "compactor_version": plan.compactor_version,
            "generated_at": plan.generated_at, "project": plan.project, "target": dict(plan.target),
            "tables": tables, "totals": asdict(plan.totals), "invocation": dict(plan.invocation)}


def dumps_compact(value: object) -> str:
    """The one JSON form plans are written and digested in (compact separators, key order kept)."""
    return json.dumps(value, separators=(",", ":"))


def dumps_action(action: Mapping[str, Any]) -> str:
    """An action as ``dumps_compact`` writes it, 4-5x faster (a plan's actions list every input file).
    orjson writes the same text as json.dumps for what an action holds (strings, integers, booleans,
    null, lists, objects) except where json escapes a character orjson writes raw (non-ASCII, DEL): those
    actions, and any orjson cannot write, take ``dumps_compact``. An action holding a float (compactor
    writes none: an edited plan) may be written differently than json would, and so fails its digest as
    any other edit does."""
    try:
        raw = orjson.dumps(action)
    except TypeError:  # an integer beyond 64 bits, a key that is not a string
        return dumps_compact(action)
    if not raw.isascii() or b"\x7f" in raw:
        return dumps_compact(action)
    return raw.decode("ascii")


def plan_digest(data: Mapping[str, Any]) -> str:
    """sha256 of a plan document without its ``digest`` key: of each action, then the rest of its table,
    table by table, then the rest of the plan, each in the form ``dumps_action`` / ``dumps_compact`` write, in the order
    the plan file holds them (so the writer hashes exactly what it writes, once). json.loads keeps key
    order and json.dumps reproduces the same text, so a plan read back digests to the same value unless
    someone edited it."""
    h = hashlib.sha256()
    for piece in digest_pieces(data):
        h.update(piece.encode())
    return "sha256:" + h.hexdigest()


def digest_pieces(data: Mapping[str, Any]) -> Iterator[str]:
    """The serialised pieces of a plan document the digest covers, in file order."""
    for t in data.get("tables") or ():
        for a in t.get("actions") or ():
            yield dumps_action(a)
        yield dumps_compact({k: v for k, v in t.items() if k != "actions"})
    yield dumps_compact({k: v for k, v in data.items() if k not in ("digest", "signature", "tables")})


def _identifier(d: Mapping[str, str] | None) -> TableIdentifier | None:
    """A table's catalog identifier as a plan file holds it (plans written before it hold none)."""
    return None if not d else TableIdentifier(d["catalog"], d["namespace"], d["table"])


def plan_from_dict(d: Mapping[str, Any]) -> Plan:
    """Inverse of plan_to_dict, for every schema version compactor reads. Callers validate against the
    plan schema of its version first."""
    version = int(d["schema_version"])
    if version not in SCHEMA_VERSIONS:
        raise PlanError(f"plan schema_version {version} is not supported (this compactor reads "
                        f"{', '.join(map(str, SCHEMA_VERSIONS))})")
    tables = []
    for t in d.get("tables", ()):
        load_format(t["format"])  # the words of its format: action types, skip reasons, blocker kinds
        actions = tuple(_action(a) for a in t.get("actions", ()))
        if version == 1:
            blockers = tuple(b for k in blocker_kinds() for b in k.from_v1(t, actions))
        else:
            blockers = tuple(Blocker.from_dict(b) for b in t.get("blockers") or ())
        tables.append(TablePlan(
            name=t["name"], path=t["path"], format=t["format"], engine=t["engine"],
            version=t.get("version"), bin_model=t.get("bin_model", BIN_MODELS[0]),
            partition_columns=tuple(t.get("partition_columns") or ()), actions=actions,
            skipped=tuple(Skip(reason=skip_reason(s["reason"]), partition=s.get("partition"),
                               details=dict(s.get("details") or {}), message=s.get("message", ""))
                          for s in t.get("skipped", ())),
            files_before=int(t.get("files_before", 0)), files_after=int(t.get("files_after", 0)),
            bytes_before=int(t.get("bytes_before", 0)), error=t.get("error"),
            policy_source=t.get("policy_source"), table_id=t.get("table_id"), blockers=blockers,
            identifier=_identifier(t.get("identifier")),
        ))
    totals = dict(d.get("totals") or {})
    if version == 1:  # tables with rows live twice no repair answers: blocked tables
        totals["blocked"] = totals.pop("duplicates", 0)
    return Plan(
        compactor_version=d["compactor_version"], generated_at=d["generated_at"],
        project=d.get("project", ""), target=dict(d.get("target") or {}), tables=tuple(tables),
        totals=Totals(**totals), schema_version=version,
        invocation=dict(d.get("invocation") or {}), digest=d.get("digest", ""),
    )


def _action(d: Mapping[str, Any]) -> Action:
    cls = action_class(str(d.get("type", "")))
    if cls is None:
        raise PlanError(f"unknown action type {d.get('type')!r}")
    return action_from_dict(cls, d)
