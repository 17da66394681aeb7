"""`compactor repair`, and the repair `apply` runs before it touches a table.

A duplicate rewrite (formats/delta/duplicates.py) is repaired under the table's lease: one
dataChange=false commit removes the extra copy and restores what the reverted rewrites consumed, with
the rows checked from parquet footers first. A second repair finds nothing to do. ``apply`` repairs
before it compacts: compacting the duplicated files would pass verification (rows in == rows out) and
make the duplication permanent; when a duplicate cannot be repaired automatically, apply leaves the
table alone and reports why.
"""

from __future__ import annotations

import datetime as dt
import logging
import os
import socket
import time
import uuid
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

from compactor import __version__
from compactor.errors import CompactorError, VerificationError
from compactor.formats import get_format
from compactor.formats.base import TableFormat
from compactor.models.results import ActionResult
from compactor.planning.plan import TablePlan
from compactor.project.model import ProjectOptions

log = logging.getLogger(__name__)

Progress = Callable[[str, dict[str, Any]], None]


def supports_repair(fmt: TableFormat) -> bool:
    return hasattr(fmt, "repair_duplicates")


def _metadata(run_id: str, table: str) -> dict[str, str]:
    return {"compactor.version": __version__, "compactor.run_id": run_id,
            "compactor.action": f"{run_id}:{table}:repair"}


def repair_before_apply(table: TablePlan, fmt: TableFormat, storage_options: Mapping[str, str], run_id: str,
                        dry_run: bool, results: list[ActionResult], progress: Progress | None = None) -> bool:
    """Repair the table's duplicate rewrites before apply touches it; appends a ``repair`` result when
    there was one. Returns True when the table must not be compacted (a duplicate that is not repaired)."""
    if not supports_repair(fmt):
        return False
    t0 = time.monotonic()
    res = ActionResult(table.name, "repair", {})
    try:
        out = fmt.repair_duplicates(table.path, storage_options, commit_metadata=_metadata(run_id, table.name),  # type: ignore[attr-defined]
                                    dry_run=dry_run)
    except VerificationError as e:
        res.status, res.error = "verification_failed", e.message
    except CompactorError as e:
        res.status, res.error = "error", str(e)
    except Exception as e:  # noqa: BLE001 - reported; the table is left alone
        log.exception("repair failed")
        res.status, res.error = "error", f"{type(e).__name__}: {e}"
    else:
        if out.status == "clean":
            return False
        res.status = "skipped" if dry_run else "success"
        res.files_removed, res.files_added = out.files_removed, out.files_restored
        res.table_version_before, res.table_version_after = out.version_before, out.version_after
        res.details = {"repair": out.to_dict(), **({"dry_run": True} if dry_run else {})}
    res.duration_s = round(time.monotonic() - t0, 3)
    results.append(res)
    if progress:
        progress("action_end", {"table": table.name, "result": res})
    return res.status in ("error", "verification_failed")


# ----------------------------------------------------------------------------- compactor repair


@dataclass
class TableRepair:
    table: str
    path: str
    status: str  # clean | repaired | would_repair | error | verification_failed | skipped
    error: str | None = None
    result: dict[str, Any] = field(default_factory=dict)

    def to_dict(self) -> dict[str, Any]:
        return {"table": self.table, "path": self.path, "status": self.status, "error": self.error, **self.result}


@dataclass
class RepairReport:
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
                 dry_run: bool = False, horizon: int | None = None) -> TableRepair:
    """Repair one table under its lease (no lease for a dry run)."""
    from compactor.runtime.lease import TableLease

    fmt = get_format(fmt_name)
    if not supports_repair(fmt):
        return TableRepair(name, path, "skipped", result={"reason": f"{fmt_name} tables have no duplicate rewrites"})
    owner = f"compactor@{socket.gethostname()}:{os.getpid()}"
    try:
        if dry_run:
            out = fmt.repair_duplicates(path, storage_options, horizon=horizon, dry_run=True)  # type: ignore[attr-defined]
        else:
            with TableLease(path, owner, run_id=run_id, storage_options=storage_options):
                out = fmt.repair_duplicates(path, storage_options, horizon=horizon,  # type: ignore[attr-defined]
                                            commit_metadata=_metadata(run_id, name))
    except VerificationError as e:
        return TableRepair(name, path, "verification_failed", e.message)
    except CompactorError as e:
        return TableRepair(name, path, "error", str(e))
    return TableRepair(name, path, out.status, result=out.to_dict())


def _run_id() -> str:
    return dt.datetime.now(dt.UTC).strftime("%Y%m%dT%H%M%SZ") + "-" + uuid.uuid4().hex[:8]


def repair_path(path: str, storage_options: Mapping[str, str] | None = None, *, dry_run: bool = False,
                horizon: int | None = None) -> RepairReport:
    """``compactor repair PATH``: one Delta table, no project needed."""
    run_id = _run_id()
    report = RepairReport(run_id, dry_run)
    report.tables.append(repair_table(path, path, "delta", storage_options or {}, run_id=run_id, dry_run=dry_run,
                                      horizon=horizon))
    return report


def repair_project(options: ProjectOptions, *, dry_run: bool = False, horizon: int | None = None) -> RepairReport:
    """``compactor repair``: every selected table of the project."""
    from compactor.project.compile import compile_project
    from compactor.tasks.plan import expand_policies

    compiled = compile_project(options)
    run_id = _run_id()
    report = RepairReport(run_id, dry_run)
    errors: dict[str, Exception] = {}
    so = compiled.target.storage_options
    for p in expand_policies(compiled.policies, compiled.project.root, so, errors):
        if p.name in errors:
            report.tables.append(TableRepair(p.name, p.path or p.name, "error", str(errors[p.name])))
            continue
        if not p.enabled or p.path is None:
            continue
        report.tables.append(repair_table(p.name, p.path, p.format, so, run_id=run_id, dry_run=dry_run,
                                          horizon=horizon))
    return report
