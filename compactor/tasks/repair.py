"""`compactor repair`: show the repair of rows live twice, then (approved) apply exactly that repair.

Rows live twice are found and repaired by the table's format (``TableFormat.duplicates``, a
``RepairsDuplicates``: None for a format whose log cannot hold them), under the table's lease: one commit
removes the extra copy and restores what the reverted rewrites consumed, after the format's proof on the
files' contents. The first pass is a dry run, which proves the repair on the files and is what
the user reviews; the second derives the repair again and commits it only when it is the same one. A
second ``compactor repair`` finds nothing to do. ``apply`` never repairs unplanned: ``plan`` lists the
repair as an action (README, Safety model).
"""

from __future__ import annotations

import datetime as dt
import logging
import os
import socket
import uuid
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from compactor import __version__
from compactor.errors import CompactorError, UnsupportedFormatError, UsageError, VerificationError
from compactor.formats import get_format
from compactor.formats.discover import format_at
from compactor.models.formats import DEFAULT_FORMAT
from compactor.models.table import TableLocation
from compactor.project.model import ProjectOptions

log = logging.getLogger(__name__)


def _metadata(run_id: str, table: str) -> dict[str, str]:
    return {"compactor.version": __version__, "compactor.run_id": run_id,
            "compactor.action": f"{run_id}:{table}:repair"}


# ----------------------------------------------------------------------------- compactor repair


@dataclass
class TableRepair:
    """What `compactor repair` did (or would do) to one table: its status, the result, the repair proved."""

    table: str
    path: str
    status: str  # clean | repaired | would_repair | error | verification_failed | skipped
    error: str | None = None
    result: dict[str, Any] = field(default_factory=dict)
    #: the repair proved (``RepairOutcome.proposal``: the format's own type)
    proposal: object | None = None
    #: how the format words the outcome (``RepairOutcome.text``; not in the JSON: ``result`` is its data)
    text: tuple[str, ...] = ()

    def to_dict(self) -> dict[str, Any]:
        return {"table": self.table, "path": self.path, "status": self.status, "error": self.error, **self.result}


@dataclass
class RepairReport:
    """One `compactor repair` run: its id, whether it was a dry run, and each table's repair."""

    run_id: str
    dry_run: bool
    tables: list[TableRepair] = field(default_factory=list)

    @property
    def ok(self) -> bool:
        return all(t.status not in ("error", "verification_failed") for t in self.tables)

    def to_dict(self) -> dict[str, Any]:
        return {"run_id": self.run_id, "dry_run": self.dry_run, "ok": self.ok,
                "tables": [t.to_dict() for t in self.tables]}


def repair_table(name: str, path: str, fmt_name: str, storage_options: Mapping[str, str], *, run_id: str,
                 dry_run: bool = False, horizon: int | None = None, expected: object | None = None) -> TableRepair:
    """Repair one table under its lease (no lease for a dry run). ``expected``: the repair the user
    approved (a dry run's); a different one derived now is refused as stale."""
    from compactor.runtime.lease import TableLease

    dups = get_format(fmt_name).duplicates
    if dups is None:
        return TableRepair(name, path, "skipped", result={"reason": f"{fmt_name} tables have no duplicate rewrites"})
    owner = f"compactor@{socket.gethostname()}:{os.getpid()}"
    try:
        if dry_run:
            out = dups.repair_duplicates(TableLocation(path, storage_options), horizon=horizon, dry_run=True)
        else:
            with TableLease(path, owner, run_id=run_id, storage_options=storage_options) as lease:
                out = dups.repair_duplicates(TableLocation(path, storage_options), horizon=horizon,
                                             commit_metadata=_metadata(run_id, name), expected=expected,
                                            fence=lease.check)
    except VerificationError as e:
        return TableRepair(name, path, "verification_failed", e.message)
    except CompactorError as e:
        return TableRepair(name, path, "error", str(e))
    return TableRepair(name, path, out.status, result=out.to_dict(), proposal=out.proposal, text=out.text(name))


def _run_id() -> str:
    return dt.datetime.now(dt.UTC).strftime("%Y%m%dT%H%M%SZ") + "-" + uuid.uuid4().hex[:8]


def _approved(approved: RepairReport | None, name: str) -> tuple[bool, object | None]:
    """(run this table?, the repair approved for it): with an approval, only tables it showed a repair for."""
    if approved is None:
        return True, None
    for t in approved.tables:
        if t.table == name and t.status == "would_repair" and t.proposal is not None:
            return True, t.proposal
    return False, None


def repair_path(path: str, storage_options: Mapping[str, str] | None = None, *, dry_run: bool = False,
                horizon: int | None = None, approved: RepairReport | None = None) -> RepairReport:
    """``compactor repair PATH``: one table, no project needed. ``approved``: the dry run the user
    approved; only the repairs it showed are committed, and only when derived again identically. Raises
    UsageError for a table whose format cannot hold duplicate rewrites (no ``duplicates``); a path that
    holds no table is read as the default format's (its error is the table's)."""
    so = storage_options or {}
    try:
        fmt = format_at(path, so)
    except CompactorError:  # the store cannot be listed: reading the table reports why, as the table's error
        fmt = None
    fmt = fmt or get_format(DEFAULT_FORMAT)
    if fmt.duplicates is None:
        raise UsageError(f"{path} is a {fmt.name} table: its log cannot hold duplicate rewrites, so there is "
                         "nothing to repair")
    run_id = _run_id()
    report = RepairReport(run_id, dry_run)
    run, expected = _approved(approved, path)
    if run:
        report.tables.append(repair_table(path, path, fmt.name, so, run_id=run_id,
                                          dry_run=dry_run, horizon=horizon, expected=expected))
    return report


def repair_project(options: ProjectOptions, *, dry_run: bool = False, horizon: int | None = None,
                   approved: RepairReport | None = None) -> RepairReport:
    """``compactor repair``: every selected table of the project (``approved``: as for repair_path)."""
    from compactor.project.compile import compile_project
    from compactor.tasks.plan import expand_policies

    compiled = compile_project(options)
    run_id = _run_id()
    report = RepairReport(run_id, dry_run)
    errors: dict[str, Exception] = {}
    so = compiled.target.storage_options
    for p in expand_policies(compiled.policies, compiled.project.root, so, errors, target=compiled.target):
        if isinstance(errors.get(p.name), UnsupportedFormatError):
            report.tables.append(TableRepair(p.name, p.path or p.name, "skipped", result={"reason": str(errors[p.name])}))
            continue
        if p.name in errors:
            report.tables.append(TableRepair(p.name, p.path or p.name, "error", str(errors[p.name])))
            continue
        run, expected = _approved(approved, p.name)
        if not p.enabled or p.path is None or not run:
            continue
        report.tables.append(repair_table(p.name, p.path, p.format, so, run_id=run_id, dry_run=dry_run,
                                          horizon=horizon, expected=expected))
    return report
