"""`compactor plan`: read every selected table (in parallel) and build the plan.

``build_plan`` is pure (policies + table states + now -> Plan); each table is planned by its format
(formats/*: plan_table is pure too). ``plan_project`` is the I/O shell around it.
"""

from __future__ import annotations

import datetime as dt
import logging
from collections.abc import Callable, Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import TYPE_CHECKING, Any

from compactor import __version__
from compactor.errors import CompactorError, TableReadError, UnsupportedFormatError
from compactor.formats import get_format
from compactor.models.state import TableState, files_table
from compactor.models.table import table_ref
from compactor.planning.plan import Plan, Skip, SkipReason, TablePlan, compute_totals
from compactor.policy.model import TablePolicy
from compactor.project.model import ProjectOptions, Target
from compactor.runtime.gc_pause import gc_paused
from compactor.runtime.paths import is_uri
from compactor.runtime.progress import phase
from compactor.runtime.secrets import redact, redact_error, register_secrets

if TYPE_CHECKING:  # pragma: no cover
    from compactor.catalogs import Catalog
    from compactor.project.compile import CompiledProject

log = logging.getLogger(__name__)


def plan_table(policy: TablePolicy, state: TableState | Exception, *, now: dt.datetime, target: Target) -> TablePlan:
    if isinstance(state, UnsupportedFormatError):  # a catalog's table in a format compactor does not plan
        return TablePlan(policy.name, policy.path or policy.name, policy.format, target.engine, None,
                         policy_source=str(policy.source), skipped=(Skip(SkipReason.UNSUPPORTED, None, {}, state.message),))
    if isinstance(state, Exception):
        msg = redact(str(state))
        return TablePlan(policy.name, policy.path or policy.name, policy.format, target.engine, None, error=msg,
                         policy_source=str(policy.source), skipped=(Skip(SkipReason.UNREADABLE, None, {}, msg),))
    planned = get_format(policy.format).plan_table(policy, state, now=now, engine=target.engine)
    return planned if policy.catalog is None else replace(planned, identifier=policy.catalog)


def build_plan(policies: Sequence[TablePolicy], states: Mapping[str, TableState | Exception], *,
               now: dt.datetime, target: Target, project_name: str,
               invocation: Mapping[str, Any] | None = None) -> Plan:
    """PURE: policies + table states + now -> Plan. states are keyed by policy name."""
    tables = []
    for p in policies:
        state = states.get(p.name)
        if state is None:
            state = TableReadError(f"{p.name}: no table state was read")
        tables.append(plan_table(p, state, now=now, target=target))
    tables_t = tuple(tables)
    return Plan(compactor_version=__version__, generated_at=now.astimezone(dt.UTC).isoformat(),
                project=project_name, target=target.redacted(), tables=tables_t, totals=compute_totals(tables_t),
                invocation=dict(invocation or {}))


# ----------------------------------------------------------------------------- the I/O shell


def resolve_path(path: str, root: Path) -> str:
    if is_uri(path) or Path(path).is_absolute():
        return path
    return str((root / path).resolve())


def expand_policies(policies: Sequence[TablePolicy], root: Path, storage_options: Mapping[str, str],
                    errors: dict[str, Exception] | None = None, *,
                    target: Target | None = None) -> list[TablePolicy]:
    """Resolve relative paths against the project root and expand `discover` entries into tables (under a
    folder, or in a catalog's namespace: the ``target``'s catalogs).

    A discover that fails (missing root, object store, catalog) keeps its policy, unexpanded, and records
    the error in `errors` under the policy's name, so one bad root never stops the other tables; without
    `errors` the error is raised. A catalog's table in a format compactor does not plan is recorded there
    too, as an UnsupportedFormatError (the plan skips it, naming the reason)."""
    from compactor.formats.discover import discover_tables
    from compactor.tasks.catalog_tables import catalog_policies, catalog_policy

    out: list[TablePolicy] = []
    opened: dict[str, Catalog] = {}
    for p in policies:
        if p.catalog is not None or (p.discover is not None and p.discover.catalog is not None):
            unsupported: dict[str, Exception] = {}
            try:
                named = (catalog_policies(p, target or Target(), opened, unsupported) if p.discover is not None
                         else [catalog_policy(p, target or Target(), opened, unsupported)])
            except CompactorError as e:
                redact_error(e)
                if errors is None:
                    raise
                errors[p.name] = e
                out.append(p)
                continue
            if errors is not None:
                errors.update(unsupported)
                out += named
            else:  # no one to hand the reasons to: tables compactor does not plan are left out
                out += [q for q in named if q.name not in unsupported]
        elif p.discover is not None and p.discover.root is not None:
            base = resolve_path(p.discover.root, root)
            try:
                found = discover_tables(base, p.discover.include, p.discover.exclude, storage_options, fmt=p.format)
            except CompactorError as e:
                redact_error(e)
                if errors is None:
                    raise
                errors[p.name] = e
                out.append(replace(p, path=base))
                continue
            for rel in found:
                out.append(replace(p, name=f"{p.name}/{rel}", path=f"{base.rstrip('/')}/{rel}", discover=None))
        elif p.path is not None:
            out.append(replace(p, path=resolve_path(p.path, root)))
        else:
            out.append(p)
    return out


def read_state(policy: TablePolicy, target: Target) -> TableState | Exception:
    try:
        path = policy.path
        if policy.is_catalog_table:
            if target.engine != "spark":
                raise TableReadError(f"'{policy.name}' is a catalog table (no path): it needs the spark engine")
            from compactor.engines.spark_session import resolve_catalog_path
            from compactor.tasks.spark_needs import any_format

            path = resolve_catalog_path(policy.name, target.spark, any_format(target.spark))
        assert path is not None
        try:
            where = table_ref(path, target.storage_options, policy.catalog, target.catalogs)
            return get_format(policy.format).read_state(where, policy)
        except TableReadError as e:
            return redact_error(_another_format(e, policy, path, target) or e)
    except CompactorError as e:
        return redact_error(e)
    except ImportError as e:
        return TableReadError(redact(f"{policy.name}: support for this table kind is not available ({e})"))
    except Exception as e:  # noqa: BLE001 - one unreadable table must not stop the plan
        return TableReadError(redact(f"{policy.name}: {type(e).__name__}: {e}"))


def _another_format(e: TableReadError, policy: TablePolicy, path: str, target: Target) -> TableReadError | None:
    """A table that cannot be read as the policy's format because it is another one (what makes it a
    table says which, e.g. a table declared with the default format): say what it is and the ``format:``
    that reads it."""
    from compactor.formats.discover import detect_at

    try:
        found = detect_at(path, target.storage_options)
    except Exception:  # noqa: BLE001 - the read's own error stands
        return None
    if found is None or found.format == policy.format:
        return None
    return TableReadError(f"{path}: not a {policy.format} table: it has {found.evidence}, so it is a {found.format} "
                          f"table; declare it with `format: {found.format}` in its policy ({policy.source})")


@dataclass(frozen=True)
class ProjectStates:
    """The selected tables as one read found them: the policies with their discover entries expanded, and
    each table's state (or why it could not be read), keyed by policy name. A command that both plans and
    shows the tables (report) reads them once."""

    policies: list[TablePolicy]
    states: dict[str, TableState | Exception]
    #: the discover entries that failed (their policy kept unexpanded; the error is also its state)
    discover_errors: dict[str, Exception] = field(default_factory=dict)


def read_project(compiled: CompiledProject, *,
                 progress: Callable[[str, int, int], None] | None = None) -> ProjectStates:
    """Expand the selected policies and read every enabled table's state (in parallel)."""
    register_secrets(compiled.target.storage_options)  # no option value in any error from here on
    discover_errors: dict[str, Exception] = {}
    policies = expand_policies(compiled.policies, compiled.project.root, compiled.target.storage_options,
                               discover_errors, target=compiled.target)
    states: dict[str, TableState | Exception] = dict(discover_errors)
    to_read = [p for p in policies if p.enabled and p.name not in discover_errors]
    with phase(f"reading {len(to_read)} table(s)", announce=False), \
            ThreadPoolExecutor(max_workers=min(8, max(1, len(to_read)))) as pool:
        futures = {p.name: pool.submit(read_state, p, compiled.target) for p in to_read}
        for i, (name, fut) in enumerate(futures.items(), 1):
            states[name] = fut.result()
            if progress:
                progress(name, i, len(futures))
    for p in policies:
        if not p.enabled:
            states[p.name] = _disabled_state(p)
    failed = {k: e for k, e in discover_errors.items() if not isinstance(e, UnsupportedFormatError)}
    return ProjectStates(policies, states, failed)


def plan_project(options: ProjectOptions, *, now: dt.datetime | None = None, out: Path | None = None,
                 progress: Callable[[str, int, int], None] | None = None, sign_key: bytes | None = None,
                 compiled: CompiledProject | None = None, read: ProjectStates | None = None) -> Plan:
    """``compiled``: the project as the command already compiled it (a command compiles once); ``read``:
    its tables as the command already read them (``read_project``)."""
    from compactor.project.compile import compile_project
    from compactor.tasks.plan_file import write_plan

    compiled = compiled or compile_project(options)
    now = now or dt.datetime.now(dt.UTC)
    read = read or read_project(compiled, progress=progress)
    with gc_paused():  # a tuple per bin and a list per action, no cycle (each collection walks the states)
        plan = build_plan(read.policies, read.states, now=now, target=compiled.target,
                          project_name=compiled.project.name,
                          invocation={"select": list(options.select), "exclude": list(options.exclude),
                                      "vars": {k: v for k, v in options.vars.items()}, "target": compiled.target.name})
        if out is not None:
            write_plan(plan, out, sign_key=sign_key)
    return plan


def _disabled_state(p: TablePolicy) -> TableState:
    return TableState(uri=p.path or p.name, format=p.format, version=None, partition_columns=(), files=files_table([]))
