"""Does a plan still say what the project's policies say? (PURE)

`compactor apply PLAN` runs a plan someone reviewed. Before anything is touched it checks the plan
against the project as it is now: same project, only tables the project declares (at the same path, of
the same format), and every action's parameters exactly what the table's policy produces (each action
type says what that is: ``Action.policy_problems``; a type that does not say is refused), with bins that
agree with the action's own counts and files inside the table. Each problem is one line; apply refuses
the plan when there is any.
"""

from __future__ import annotations

from collections.abc import Sequence

from compactor.models.formats import format_spec, metadata_names
from compactor.planning.actions import Action, RewriteAction, digest_paths
from compactor.planning.plan import Plan, TablePlan
from compactor.planning.vocabulary import action_types
from compactor.policy.model import TablePolicy


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
        if t.identifier is not None and t.identifier != policy.catalog:
            problems.append(f"table '{t.name}': the plan names catalog table {t.identifier}, the policy "
                            + (f"names {policy.catalog}" if policy.catalog is not None else "names none"))
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
    reserved = metadata_names()  # every format's metadata (its log), compactor's own state
    hidden = tuple(r for r in reserved if r.startswith(("_", ".")))  # no reader's data: its prefix too
    if any(p in reserved or p.startswith(hidden) for p in parts):
        return f"{path} lies in the table's log or in compactor's state, which no action may touch"
    return None


def action_problems(a: Action, policy: TablePolicy, table: TablePlan) -> list[str]:
    out = _shape_problems(a)
    spec = format_spec(table.format)
    if spec is None:
        return [f"{table.format} is not a table format compactor knows"]
    paths = {*a.input_paths, *(() if a.lists_metadata else a.digested_paths)}
    out += sorted({x for p in paths if (x := path_problem(p, absolute_ok=spec.absolute_paths)) is not None})
    out += a.policy_problems(policy)
    if a.type not in action_types(table.format):
        out.append(f"{a.type} actions are not run on {table.format} tables")
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
