"""Does a plan still say what the project's policies say? (PURE)

`compactor apply PLAN` runs a plan someone reviewed. Before anything is touched it checks the plan
against the project as it is now: same project, only tables the project declares (at the same path, of
the same format), and every action's parameters exactly what the table's policy produces (target sizes,
strategy columns, vacuum retention, table properties, sink guards), with bins that agree with the
action's own counts. Each problem is one line; apply refuses the plan when there is any.
"""

from __future__ import annotations

from collections.abc import Sequence

from compactor.models.formats import FORMATS, format_spec
from compactor.planning.actions import (
    ACTION_TYPES,
    Action,
    RewriteAction,
    SetPropertiesAction,
    SinkGuards,
    SinkPruneAction,
    SortAction,
    VacuumAction,
    ZOrderAction,
    digest_paths,
)
from compactor.planning.plan import Plan, TablePlan
from compactor.planning.retention import declared_properties, vacuum_retention_hours
from compactor.policy.model import Sink, TablePolicy

#: every action type has its checks here (a new type must add them: an unknown one is refused)
_KNOWN = frozenset(ACTION_TYPES.values())
_STRATEGY = {"compact": "bin_pack", "sink_compact": "bin_pack", "z_order": "z_order", "sort": "sort"}


def plan_problems(plan: Plan, project_name: str, policies: Sequence[TablePolicy], engine: str) -> list[str]:
    """Everything in ``plan`` that the project (its expanded, path-resolved ``policies``) does not declare."""
    problems: list[str] = []
    if plan.project != project_name:
        problems.append(f"the plan was made for project '{plan.project}', this project is '{project_name}'")
    by_name = {p.name: p for p in policies}
    for t in plan.tables:
        policy = by_name.get(t.name)
        if policy is None:
            if t.actions:
                problems.append(f"table '{t.name}' is not declared by this project's policies")
            continue
        if t.path != policy.path and policy.path is not None:
            problems.append(f"table '{t.name}': the plan's path {t.path} is not the policy's path {policy.path}")
        if t.format != policy.format:
            problems.append(f"table '{t.name}': the plan's format {t.format} is not the policy's {policy.format}")
        if t.engine != engine:
            problems.append(f"table '{t.name}' was planned for the {t.engine} engine, the target uses {engine}")
        for i, a in enumerate(t.actions):
            problems += [f"table '{t.name}' action {i} ({a.type}): {p}" for p in action_problems(a, policy, t)]
        problems += [f"table '{t.name}': {p}" for p in shared_files(t.actions)]
    return problems


def shared_files(actions: Sequence[Action]) -> list[str]:
    """Files named by two actions of one table (each action checks its own): splitting one action into
    two that share a file would rewrite that file's rows twice in one commit."""
    seen: dict[str, int] = {}
    out = []
    for i, a in enumerate(actions):
        for p in set(a.input_paths):
            if p in seen:
                out.append(f"{p} is in action {seen[p]} and action {i}: a file may be in one action only")
            seen.setdefault(p, i)
    return out


#: folders no action may ever name a file in: every format's log (its marker), compactor's own state
_RESERVED = (*(f.marker for f in FORMATS), "_compactor")


def path_problem(path: str, *, absolute_ok: bool = False) -> str | None:
    """Why ``path`` may not be a file an action rewrites or deletes, or None. Lexical: the formats also
    resolve it on storage (a symlink out of the table is caught there)."""
    if "\\" in path or "\x00" in path:
        return f"{path!r} is not a plain path"
    rel = path
    if "://" in path or path.startswith("/"):
        if not absolute_ok:
            return f"{path} is absolute: the plan names a table's files relative to the table"
        rel = path.split("://", 1)[1] if "://" in path else path
    parts = rel.split("/")
    if any(p in (".", "..") for p in parts) or (not absolute_ok and "" in parts):
        return f"{path} is not a normalised path"
    if any(p.startswith(_RESERVED) for p in parts):
        return f"{path} lies in the table's log or in compactor's state, which no action may touch"
    return None


def action_problems(a: Action, policy: TablePolicy, table: TablePlan) -> list[str]:
    out = _shape_problems(a)
    spec = format_spec(table.format)
    if spec is None:
        return [f"{table.format} is not a table format compactor knows"]
    out += sorted({x for p in a.input_paths if (x := path_problem(p, absolute_ok=spec.absolute_paths)) is not None})
    if isinstance(a, RewriteAction):
        out += _rewrite_problems(a, policy)
    elif isinstance(a, VacuumAction):
        r = policy.retention
        if r is None or not r.vacuum.enabled:
            out.append("the policy does not enable vacuum")
        elif a.retention_hours != vacuum_retention_hours(r):
            out.append(f"retention_hours {a.retention_hours} is not the policy's {vacuum_retention_hours(r)}")
        if r is not None and a.dry_run_first != r.vacuum.dry_run_first:
            out.append(f"dry_run_first {a.dry_run_first} is not the policy's {r.vacuum.dry_run_first}")
        if a.files is not None:
            if a.files_to_delete != len(a.files):
                out.append(f"files_to_delete {a.files_to_delete} does not match the {len(a.files)} file(s) it lists")
            out += sorted({x for p in a.files if (x := path_problem(p)) is not None})
    elif isinstance(a, SetPropertiesAction):
        r = policy.retention
        declared = declared_properties(r) if r is not None and r.manage_properties else {}
        for k, v in a.properties.items():
            if declared.get(k) != v:
                out.append(f"property {k}={v!r} is not what the policy declares ({declared.get(k)!r})")
    if isinstance(a, SinkGuards):
        out += _guard_problems(a, policy.sink or Sink())
    if isinstance(a, SinkPruneAction):
        s = policy.sink or Sink()
        if not (s.prune and s.retention):
            out.append("the policy does not enable manifest pruning (sink.prune with sink.retention)")
        elif a.retention != s.retention or a.delete_files != s.prune_delete_files:
            out.append(f"retention {a.retention} / delete_files {a.delete_files} is not the policy's "
                       f"{s.retention} / {s.prune_delete_files}")
    if a.type not in spec.action_types:
        out.append(f"{a.type} actions are not run on {table.format} tables")
    if type(a) not in _KNOWN:
        out.append(f"apply does not know how to check a {a.type} action")
    if set(a.partition) - set(table.partition_columns):
        out.append(f"partition {dict(a.partition)} names columns that are not the table's partition columns")
    return out


def _shape_problems(a: Action) -> list[str]:
    paths = a.input_paths
    out = []
    if not a.precondition.digest:
        out.append("it has no precondition digest")
    elif digest_paths(a.digested_paths) != a.precondition.digest:
        out.append("its files do not match its precondition digest (bins were edited)")
    if a.bins and any(not b for b in a.bins):
        out.append("a bin is empty")
    if len(set(paths)) != len(paths):
        out.append("a file is listed twice in the bins")
    if a.rewrites and a.input_files != len(paths):
        out.append(f"input_files {a.input_files} does not match the {len(paths)} file(s) listed in bins")
    if isinstance(a, RewriteAction) and type(a).strategy == "bin_pack" and a.expected_output_files != len(a.bins):
        out.append(f"expected_output_files {a.expected_output_files} does not match its {len(a.bins)} bin(s)")
    return out


def _rewrite_problems(a: RewriteAction, policy: TablePolicy) -> list[str]:
    c = policy.compaction
    out = []
    if not c.enabled or not policy.enabled:
        out.append("the policy does not enable compaction")
    if _STRATEGY.get(a.type) != c.strategy:
        out.append(f"a {a.type} action, but the policy's strategy is {c.strategy}")
    expected = (("target_file_size", c.target_file_size), ("min_file_size", c.min_file_size), ("method", c.method))
    for k, v in expected:
        if getattr(a, k) != v:
            out.append(f"{k} {getattr(a, k)!r} is not the policy's {v!r}")
    if isinstance(a, ZOrderAction) and tuple(a.z_order_by) != tuple(c.z_order_by):
        out.append(f"z_order_by {list(a.z_order_by)} is not the policy's {list(c.z_order_by)}")
    if isinstance(a, SortAction) and tuple(a.sort_by) != tuple(c.sort_by):
        out.append(f"sort_by {list(a.sort_by)} is not the policy's {list(c.sort_by)}")
    return out


def _guard_problems(a: SinkGuards, sink: Sink) -> list[str]:
    out = []
    for k in ("quiet_period", "checkpoint", "writer_stopped_check", "downstream_streaming_readers", "grace_period"):
        if getattr(a, k) != getattr(sink, k):
            out.append(f"{k} {getattr(a, k)!r} is not the policy's {getattr(sink, k)!r}")
    return out
