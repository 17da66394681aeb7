"""The plan schema's generated parts: each action type's ``params`` from its class, the action types, skip
reasons and blocker kinds from the registry; the shipped file is exactly what the generator writes. And
each action type owns its rules: apply refuses a type that does not say how to check it."""

from __future__ import annotations

import datetime as dt
from dataclasses import dataclass, field
from pathlib import Path
from typing import ClassVar, Literal

import pytest

from compactor.planning.actions import Action, Precondition
from compactor.planning.integrity import action_problems
from compactor.planning.plan import TablePlan
from compactor.planning.vocabulary import action_classes, blocker_kinds, skip_reasons
from compactor.policy.model import TablePolicy
from compactor.tasks.plan_schema import plan_schema, plan_schema_text

REPO = Path(__file__).resolve().parents[2]


def test_the_shipped_plan_schema_is_the_generated_one() -> None:
    """Regenerate with the command in compactor/tasks/plan_schema.py's docstring."""
    generated = plan_schema_text()
    assert (REPO / "schemas" / "plan.schema.json").read_text() == generated
    assert (REPO / "compactor" / "schemas" / "plan.schema.json").read_text() == generated  # the package's copy
    schema = plan_schema()
    action = schema["$defs"]["action"]
    assert action["properties"]["type"]["enum"] == [c.type for c in action_classes()]
    assert [f["if"]["properties"]["type"]["const"] for f in action["allOf"]] == [c.type for c in action_classes()]
    assert schema["$defs"]["skip"]["properties"]["reason"]["enum"] == skip_reasons()
    assert schema["$defs"]["blocker"]["properties"]["kind"]["enum"] == [k.kind for k in blocker_kinds()]
    assert schema["properties"]["schema_version"]["const"] == 2


@dataclass(frozen=True, kw_only=True)
class _Toy(Action):
    """An action type no format registered: its schema follows from its fields; apply cannot check it."""

    type: ClassVar[str] = "toy"
    size: int = field(metadata={"schema": {"minimum": 1}})
    mode: Literal["a", "b"] = "a"
    tags: tuple[str, ...] = field(default=(), metadata={"required": True})
    note: str | None = None
    labels: dict[str, str | None] = field(default_factory=dict)


def test_an_action_types_params_schema_follows_from_its_fields() -> None:
    assert _Toy.params_schema() == {
        "type": "object", "additionalProperties": False, "required": ["size", "tags"],
        "properties": {
            "size": {"type": "integer", "minimum": 1}, "mode": {"enum": ["a", "b"]},
            "tags": {"type": "array", "items": {"type": "string"}}, "note": {"type": ["string", "null"]},
            "labels": {"type": "object", "additionalProperties": {"type": ["string", "null"]}}}}

    @dataclass(frozen=True, kw_only=True)
    class Odd(Action):
        type: ClassVar[str] = "odd"
        when: dt.datetime = dt.datetime(2024, 1, 1)

    with pytest.raises(TypeError, match="no plan schema"):
        Odd.params_schema()


def test_every_action_type_says_how_apply_checks_it_and_an_unknown_one_is_refused() -> None:
    assert all(c.policy_problems is not Action.policy_problems for c in action_classes())
    toy = _Toy(size=1, precondition=Precondition.of(1, ()))
    problems = action_problems(toy, TablePolicy(name="t", path="/t"), TablePlan("t", "/t", "delta", "local", 1))
    assert "apply does not know how to check a toy action" in problems
    assert "toy actions are not run on delta tables" in problems


def test_only_a_vacuum_runs_in_a_dry_run() -> None:
    """A dry run lists what a VACUUM would delete; every other action is only checked and reported."""
    assert {c.type for c in action_classes() if c.runs_in_dry_run} == {"vacuum"}
