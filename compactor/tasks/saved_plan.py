"""A saved plan applied as Terraform applies one: with the target it was made for, and once.

`compactor plan --target spark` writes the target into the plan; `compactor apply target/plan.json` takes
it from there (a ``--target`` that contradicts it is refused, naming the exact command). A plan some run
already applied (wholly or in part) is refused: its actions would all be stale, and the next plan holds
exactly what is left."""

from __future__ import annotations

import shlex
from dataclasses import replace
from pathlib import Path

from compactor.errors import StalePlanError, UsageError
from compactor.models.results import RunResults
from compactor.planning.plan import Plan
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
