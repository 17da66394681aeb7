"""The plan schema, its generated parts filled from the registered words: the action types and the
schema of each one's ``params`` (from the action classes, planning/action_schema.py), the skip reasons and
the blocker kinds, the shared ones and every format's (planning/vocabulary.py). The format enums are filled
as for every schema (policy/schema.py).

Plans are validated against ``plan_schema()``; the shipped schemas/plan.schema.json is what
``plan_schema_text()`` returns, so editors and other tools read the same (a test keeps them equal:
regenerate with ``python -c 'from compactor.tasks.plan_schema import plan_schema_text as t;
print(t(), end="")' > schemas/plan.schema.json``)."""

from __future__ import annotations

import copy
import functools
import json
from importlib import resources
from typing import Any

from compactor.models.formats import generation
from compactor.planning.vocabulary import action_classes, blocker_kinds, skip_reasons
from compactor.policy.schema import load_schema

NAME = "plan.schema.json"


def fill(doc: dict[str, Any]) -> dict[str, Any]:
    """``doc`` (the plan schema) with its generated parts put in, in place."""
    classes = action_classes()
    action = doc["$defs"]["action"]
    action["properties"]["type"]["enum"] = [c.type for c in classes]
    action["allOf"] = [{"if": {"properties": {"type": {"const": c.type}}, "required": ["type"]},
                        "then": {"properties": {"params": c.params_schema()}}} for c in classes]
    doc["$defs"]["skip"]["properties"]["reason"]["enum"] = skip_reasons()
    doc["$defs"]["blocker"]["properties"]["kind"]["enum"] = [k.kind for k in blocker_kinds()]
    return doc


def plan_schema() -> dict[str, Any]:
    """The schema plans of the current schema version are validated against (do not modify it), with the
    words of the formats registered now (kept per registry generation)."""
    return _plan_schema(generation())


@functools.cache
def _plan_schema(_generation: int) -> dict[str, Any]:
    return fill(copy.deepcopy(load_schema(NAME)))


def plan_schema_text() -> str:
    """schemas/plan.schema.json as it must be shipped: the file with its generated parts filled (the format
    enums are filled when it is loaded, so they are not written)."""
    text = resources.files("compactor").joinpath("schemas", NAME).read_text(encoding="utf-8")
    return json.dumps(fill(json.loads(text)), indent=2) + "\n"
