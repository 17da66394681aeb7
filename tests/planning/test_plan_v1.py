"""Plans of schema version 1 (compactor before blockers) still load and apply: their digest verifies over
the file as written, every action type reads back as its class, rows live twice (a Delta table's
``duplicate_rewrite``) become its blockers, answered by the same repair, and plan and apply say the same
words. tests/planning/v1 holds a version-1 plan and what plan and apply printed for it, all written by that
compactor (make.py says how)."""

from __future__ import annotations

import copy
import hashlib
import io
import json
from pathlib import Path
from typing import Any

import jsonschema
import pytest
from click.testing import CliRunner
from deltalake import DeltaTable
from rich.console import Console

from compactor.cli import cli
from compactor.cli.plan import apply_hint
from compactor.errors import PlanError
from compactor.output.plan_render import render_markdown, render_text
from compactor.planning.plan import compute_totals, plan_digest
from compactor.planning.vocabulary import action_class, action_classes
from compactor.tasks.plan_file import load_plan, write_plan
from compactor.tasks.plan_schema import plan_schema
from compactor.tasks.table_run import _refused
from tests.apply.helpers import exactly_once, ids, make_table
from tests.duplicates.test_tables import _duplicated_by_a_race

V1 = Path(__file__).parent / "v1"
#: action types added after plans of schema version 1 were written (Iceberg's retention and maintenance, Delta's purge)
AFTER_V1 = frozenset({"expire_snapshots", "remove_orphan_files", "rewrite_position_deletes", "rewrite_manifests", "purge"})


def test_a_version_1_plan_loads_with_its_digest_and_every_action_type() -> None:
    written = json.loads((V1 / "plan.json").read_text())
    plan = load_plan(V1 / "plan.json")
    assert (plan.schema_version, plan.digest) == (1, written["digest"])
    actions = [a for t in plan.tables for a in t.actions]
    # every type there was: those added after schema version 1 cannot be in a plan it wrote
    assert sorted(a.type for a in actions) == sorted(c.type for c in action_classes() if c.type not in AFTER_V1)
    assert all(type(a) is action_class(a.type) for a in actions)
    by_type = {a.type: a for a in actions}
    for a, raw in zip(actions, (r for t in written["tables"] for r in t["actions"])):
        assert a.params() == raw["params"] and a.precondition.digest == raw["precondition"]["digest"]
    assert by_type["vacuum"].digested_paths == ("date=0/old.parquet",)
    assert by_type["repair"].input_paths == ("date=1/c.parquet", "date=1/a.parquet")
    events, clicks = plan.tables[:2]
    # rows live twice: answered by the repair (action 0) in events, by nothing in clicks
    (answered,) = events.blockers
    assert (answered.kind, answered.answered_by, answered.details["later_version"]) == ("duplicate_rewrite", 0, 7)
    assert events.answered(answered) and not events.unanswered
    (left,) = clicks.blockers
    assert left.answered_by is None and clicks.unanswered == [left]
    assert left.details["reason"] == "a later commit changed the rows of the extra copy"
    assert plan.totals.blocked == 1 == written["totals"]["duplicates"]
    assert compute_totals(plan.tables) == plan.totals


def test_plan_prints_a_version_1_plan_in_the_same_words() -> None:
    plan = load_plan(V1 / "plan.json")
    buf = io.StringIO()
    render_text(plan, Console(file=buf, width=160, color_system=None, highlight=False), partitions=True)
    text = buf.getvalue() + apply_hint(plan, Path("plan.json"), None, None, Path("plan.json")) + "\n"
    assert text == (V1 / "plan.txt").read_text()
    assert render_markdown(plan) == (V1 / "plan.md").read_text()


def test_apply_refuses_what_it_refused_in_the_same_words() -> None:
    plan = load_plan(V1 / "plan.json")
    refused = []
    for t in plan.tables:
        results: list[Any] = []
        if _refused(t, results, None):
            refused += [f"{t.name}\t{r.type}\t{r.status}\t{r.error}" for r in results]
    assert "\n".join(refused) + "\n" == (V1 / "refusals.txt").read_text()


def test_a_version_1_plan_is_checked_against_its_own_schema_and_digest(tmp_path: Path) -> None:
    doc = json.loads((V1 / "plan.json").read_text())
    doc["tables"][0]["duplicate_rewrite"][0]["rows"] = 2  # fewer rows live twice than found
    bad = tmp_path / "bad.json"
    bad.write_text(json.dumps(doc))
    with pytest.raises(PlanError, match="modified after `compactor plan` wrote it"):
        load_plan(bad)
    doc["tables"][0]["duplicate_rewrite"][0]["kind"] = "felt_like_it"
    doc.pop("digest")
    doc["digest"] = plan_digest(doc)
    bad.write_text(json.dumps(doc))
    with pytest.raises(PlanError, match="plan.v1.schema.json at tables/0/duplicate_rewrite/0/kind"):
        load_plan(bad)


def test_a_version_1_plan_written_again_is_a_version_2_plan(tmp_path: Path) -> None:
    plan = load_plan(V1 / "plan.json")
    again = load_plan(write_plan(plan, tmp_path / "plan.json"))
    doc = json.loads((tmp_path / "plan.json").read_text())
    jsonschema.validate(doc, plan_schema())
    assert doc["schema_version"] == again.schema_version == 2 and "duplicate_rewrite" not in doc["tables"][0]
    assert [t.blockers for t in again.tables] == [t.blockers for t in plan.tables]
    assert [t.actions for t in again.tables] == [t.actions for t in plan.tables]


def as_v1(doc: dict[str, Any], *, unanswerable: str | None = None) -> dict[str, Any]:
    """A version-2 plan document as compactor wrote it at schema version 1 (independent of compactor's own
    reading of it): rows live twice as the table's ``duplicate_rewrite``, each entry the fields of the
    commit that made them so (a blocker's details), ``totals.duplicates``, and its digest over that text.
    ``unanswerable``: the reason compactor could not prove a repair (the repair is left out, as the
    planner of version 1 left it out then)."""
    doc = copy.deepcopy(doc)
    doc.pop("digest", None)
    doc["schema_version"] = 1
    for t in doc["tables"]:
        found = [b["details"] for b in t.pop("blockers", [])]
        if found and unanswerable is not None:
            t["actions"] = [a for a in t["actions"] if a["type"] != "repair"]
            found = [{**d, "repairable": False, "reason": unanswerable} for d in found]
        if found:
            t["duplicate_rewrite"] = found
    totals = doc["totals"]
    totals["duplicates"] = totals.pop("blocked") or (1 if unanswerable else 0)
    doc["digest"] = plan_digest(doc)
    return doc


def _run(*args: str):
    return CliRunner().invoke(cli, list(args), catch_exceptions=False)


def _tree(root: Path) -> str:
    """The table's log and data files (its lease, under ``_compactor/``, comes and goes with every apply)."""
    h = hashlib.sha256()
    for f in sorted(p for p in root.rglob("*") if "_compactor" not in p.relative_to(root).parts):
        h.update(str(f.relative_to(root)).encode())
        if f.is_file():
            h.update(f.read_bytes())
    return h.hexdigest()


def test_a_version_1_plan_with_rows_live_twice_applies_the_repair_then_the_rest(tmp_path: Path) -> None:
    t, n, proj = _duplicated_by_a_race(tmp_path)
    make_table(t, partitions=2, appends=2, rows=10, start=n)  # small files to compact after the repair
    n += 40
    policy = proj / "policies" / "t.yml"
    policy.write_text(policy.read_text() + "    retention: {deleted_file_retention: 8d, vacuum: {enabled: true}}\n")
    r = _run("plan", "--project-dir", str(proj), "--format", "json", "--out", str(tmp_path / "v2.json"))
    assert r.exit_code == 0, r.output
    v2 = json.loads((tmp_path / "v2.json").read_text())
    assert [a["type"] for a in v2["tables"][0]["actions"]][:2] == ["repair", "compact"]
    assert {a["type"] for a in v2["tables"][0]["actions"]} >= {"set_properties", "vacuum"}
    v1 = tmp_path / "v1.json"
    v1.write_text(json.dumps(as_v1(v2)))
    assert load_plan(v1).tables[0].blockers == load_plan(tmp_path / "v2.json").tables[0].blockers
    done = _run("apply", str(v1), "--project-dir", str(proj), "--format", "json")
    assert done.exit_code == 0, done.output
    results = json.loads((proj / "target" / "run_results.json").read_text())["results"]
    assert [(x["type"], x["status"]) for x in results] == [(a["type"], "success") for a in v2["tables"][0]["actions"]]
    exactly_once(t, n)


def test_a_version_1_plan_with_rows_live_twice_no_repair_answers_is_refused_and_nothing_changes(
        tmp_path: Path) -> None:
    t, n, proj = _duplicated_by_a_race(tmp_path)
    r = _run("plan", "--project-dir", str(proj), "--format", "json", "--out", str(tmp_path / "v2.json"))
    assert r.exit_code == 0, r.output
    doc = as_v1(json.loads((tmp_path / "v2.json").read_text()), unanswerable="the extra copy was changed since")
    assert all(a["type"] != "repair" for a in doc["tables"][0]["actions"]) and doc["tables"][0]["duplicate_rewrite"]
    v1 = tmp_path / "v1.json"
    v1.write_text(json.dumps(doc))
    later = doc["tables"][0]["duplicate_rewrite"][0]["later_version"]
    before = _tree(t)
    refused = _run("apply", str(v1), "--project-dir", str(proj))
    assert refused.exit_code == 1, refused.output
    assert (f"rows live twice since version(s) [{later}] and compactor will not repair them automatically: the extra "
            "copy was changed since; the table was not touched") in " ".join(refused.output.split())
    assert _tree(t) == before and sum(ids(t).values()) == 2 * n
    assert DeltaTable(str(t)).version() == later
