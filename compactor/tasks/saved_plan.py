"""A saved plan applied as Terraform applies one: with the target it was made for, once, and where it pins.

`compactor plan --target spark` writes the target into the plan; `compactor apply target/plan.json` takes
it from there (a ``--target`` that contradicts it is refused, naming the exact command). A plan some run
already applied (wholly or in part) is refused: its actions would all be stale, and the next plan holds
exactly what is left. The tables a catalog located (a ``catalog:`` entry, a discover over a catalog, a dbt
node) are taken at the locations the plan pins, without asking the catalog again (a Hive metastore would
start a JVM): apply checks each pinned table's identity on storage instead (its log and table id,
tasks/table_run.py)."""

from __future__ import annotations

import shlex
from dataclasses import replace
from pathlib import Path

from compactor.errors import StalePlanError, UsageError
from compactor.models.results import RunResults
from compactor.planning.plan import Plan
from compactor.policy.model import TablePolicy
from compactor.project.model import ProjectOptions


def _command(*args: str, options: ProjectOptions, target: str | None = None) -> str:
    cmd = ["compactor", *args]
    if Path(options.project_dir) != Path("."):
        cmd += ["--project-dir", str(options.project_dir)]
    if target:
        cmd += ["--target", target]
    return shlex.join(cmd)


def planned_target(plan: Plan) -> str | None:
    """The name of the target the plan was made for (None: a plan that does not say)."""
    name = plan.target.get("name")
    return str(name) if name else None


def options_for_plan(options: ProjectOptions, plan: Plan, plan_file: Path | str) -> ProjectOptions:
    """``options`` with the plan's target: a plan is applied with the target it was made for (its storage
    options, engine and settings); a ``--target`` naming another one is refused."""
    planned = planned_target(plan)
    if planned is None or options.target == planned:
        return options
    if options.target is None:
        return replace(options, target=planned)
    raise UsageError(f"the plan {plan_file} was made for target '{planned}', not '{options.target}'",
                     hint=f"apply it as planned: `{_command('apply', str(plan_file), options=options)}` (target "
                          f"'{planned}'), or plan for '{options.target}': "
                          f"`{_command('plan', options=options, target=options.target)}`")


def applied_by(plan: Plan, runs: list[RunResults]) -> RunResults | None:
    """The first run (of ``runs``, oldest first) that applied ``plan``, wholly or in part: it committed an
    action of it. A dry run applies nothing; a run that failed before committing anything applied nothing."""
    for run in runs:
        same = run.plan_digest == plan.digest if run.plan_digest else \
            run.plan_file is not None and run.plan_generated_at == plan.generated_at
        if same and not run.dry_run and any(r.status == "success" for r in run.results):
            return run
    return None


def refuse_if_applied(plan: Plan, runs: list[RunResults], options: ProjectOptions) -> None:
    """Refuse a saved plan a run already applied (as Terraform refuses a saved plan once applied)."""
    run = applied_by(plan, runs)
    if run is None:
        return
    how = " (in part: it was interrupted)" if run.interrupted else ""
    raise StalePlanError(f"this plan was applied by run {run.run_id}{how}; run `compactor plan` for a new one",
                         hint=f"`{_command('plan', options=options, target=options.target)}` plans what is left")


def located_by_catalog(policy: TablePolicy) -> bool:
    """A policy whose table(s) a catalog locates: named in a catalog, or a discover over a catalog."""
    return policy.catalog is not None or (policy.discover is not None and policy.discover.catalog is not None)


def pinned_policies(policies: list[TablePolicy] | tuple[TablePolicy, ...], plan: Plan) -> list[TablePolicy]:
    """The tables of ``policies`` a catalog locates, at the locations (and in the formats) ``plan`` pins for
    them: a ``catalog:`` policy is its plan table of the same name, a discover over a catalog each plan table
    named ``<policy>/<table>``, with the identifier the plan records (none in a plan written before plans
    recorded it: the table is then known by its pinned location alone). A table the plan does not hold is
    not applied (it has no action)."""
    out: list[TablePolicy] = []
    for p in policies:
        if p.discover is not None:
            out += [replace(p, name=t.name, path=t.path, format=t.format, discover=None, catalog=t.identifier)
                    for t in plan.tables if t.name.startswith(f"{p.name}/")]
        else:
            out += [replace(p, path=t.path, format=t.format) for t in plan.tables if t.name == p.name]
    return out
