"""The contract every table format keeps, run end to end (plan through the api, apply through the CLI, the
local engine) for each registered format the adapters know, Delta and the file sink, and for the toy
format registered from the test (tests/formats/contract/toy_format.py):

- plan determinism: the same table and clock plan the same bytes (and digest);
- exact bins: apply replaces exactly the planned files, one new file per bin holding that bin's rows, and
  nothing else changes;
- rows verified: the table holds the same multiset of rows after apply, and run results say so;
- stale refusal: a change another writer makes after planning makes apply refuse the action it touches,
  committing nothing of it;
- crash recovery: a run killed at any of the format's crash points (and at the lease) loses no row and
  references no missing file; the next plan and apply recover it, leaving no orphan, and converge;
- convergence: plan, apply, plan plans nothing;
- tampering: an edited plan is refused before anything is touched;
- detection: the format finds its table at its path and under a root.
"""

from __future__ import annotations

import datetime as dt
import hashlib
import json
from collections import Counter
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from compactor.formats.discover import detect_at, discover_tables
from compactor.models.formats import format_spec
from compactor.planning.actions import digest_paths
from compactor.planning.plan import plan_digest
from tests.formats.contract.adapters import ADAPTERS, Adapter, Row, file_rows
from tests.formats.contract.lake import SMALL, Lake


def _bin_rows(lake: Lake, b: list[str]) -> Counter[Row]:
    out: Counter[Row] = Counter()
    for rel in b:
        out += file_rows(lake.table, rel)
    return out


def test_the_same_table_and_clock_plan_the_same_bytes(lake: Lake, now: dt.datetime) -> None:
    first, second = lake.plan(now, "first.json"), lake.plan(now, "second.json")
    assert lake.actions(first), "the contract table has small files to compact"
    assert first.read_bytes() == second.read_bytes()
    assert lake.doc(first)["digest"] == plan_digest(lake.doc(second)) != ""


def test_apply_replaces_exactly_the_planned_bins_and_nothing_else(lake: Lake, now: dt.datetime) -> None:
    plan = lake.plan(now)
    bins = lake.bins(plan)
    before = lake.live()
    bin_rows = [_bin_rows(lake, b) for b in bins]
    planned = {p for b in bins for p in b}
    assert len(bins) >= 2 and planned < before and len(planned) == sum(map(len, bins))

    run = lake.apply(plan)
    assert run.exit_code == 0 and set(run.statuses()) == {"success"}, run.output
    after = lake.live()
    assert before - after == planned  # every planned file replaced, no other
    added = after - before
    assert len(added) == len(bins)  # one new file per bin
    assert sorted(sorted(file_rows(lake.table, f).items()) for f in added) == \
        sorted(sorted(r.items()) for r in bin_rows)  # each holding exactly its bin's rows
    assert lake.leftovers() == []


def test_apply_keeps_every_row_and_says_so(lake: Lake, now: dt.datetime) -> None:
    before = lake.rows()
    plan = lake.plan(now)
    planned = [sum(sum(_bin_rows(lake, [lake.adapter.rel(lake.table, p) for p in b]).values()) for b in a["bins"])
               for a in lake.actions(plan)]
    run = lake.apply(plan)
    assert run.exit_code == 0, run.output
    assert lake.rows() == before
    assert [(r["rows_before"], r["rows_after"]) for r in run.results] == [(n, n) for n in planned]


def test_a_change_after_planning_makes_apply_refuse_the_action_it_touches(lake: Lake, now: dt.datetime) -> None:
    plan = lake.plan(now)
    touched = lake.bins(plan)[0][0]
    lake.adapter.conflict(lake.table, touched)
    live, rows = lake.live(), lake.rows()
    first = lake.actions(plan)[0]
    untouched = [rel for b in first["bins"] for p in b if (rel := lake.adapter.rel(lake.table, p)) != touched]

    run = lake.apply(plan)
    assert run.exit_code == 0, run.output  # a stale action is no failure: the next plan takes the table as it is
    assert run.statuses()[0] == "stale", run.results
    assert lake.rows() == rows  # the other writer's change stands; nothing of compactor's was committed
    assert set(untouched) <= lake.live() and set(untouched) <= live
    committed = {p for r, a in zip(run.results, lake.actions(plan)) if r["status"] == "success"
                 for b in a["bins"] for p in b}
    assert live - lake.live() == {lake.adapter.rel(lake.table, p) for p in committed}
    assert lake.leftovers() == []


def _crash_cases() -> list[Any]:
    return [pytest.param(a, point, id=f"{a.name}-{point}")
            for a in ADAPTERS for point in ("lease.acquired", *a.crash_points)]


@pytest.mark.parametrize(("adapter", "point"), _crash_cases(), indirect=["adapter"])
def test_a_run_killed_at_a_crash_point_is_recovered_and_converges(lake: Lake, now: dt.datetime, point: str) -> None:
    """The next apply on the table recovers what the killed run left (apply recovers a table it has work
    for: two more small files make sure it has, whatever the killed run committed)."""
    rows = lake.rows()
    plan = lake.plan(now)
    assert lake.apply_killed_at(plan, point), f"the run never reached crash point {point}"
    assert lake.rows() == rows  # whatever the point, every row exactly once
    assert all((lake.table / f).is_file() for f in lake.live())  # no listed file is missing

    for ids in (range(100_000, 100_000 + SMALL), range(200_000, 200_000 + SMALL)):
        lake.adapter.write(lake.table, ids, 0)
    rows = lake.rows()
    again = lake.plan(dt.datetime.now(dt.UTC), "again.json")
    assert lake.actions(again)
    run = lake.apply(again)
    assert run.exit_code == 0, run.output
    assert lake.rows() == rows
    assert lake.leftovers() == []  # the killed run's outputs, staging and journal are gone
    assert lake.actions(lake.plan(dt.datetime.now(dt.UTC), "last.json")) == []


def test_plan_apply_plan_plans_nothing(lake: Lake, now: dt.datetime) -> None:
    run = lake.apply(lake.plan(now))
    assert run.exit_code == 0, run.output
    last = lake.doc(lake.plan(dt.datetime.now(dt.UTC), "last.json"))["tables"][0]
    assert last["actions"] == [] and not last.get("blockers") and not last.get("error"), last


def _resign(doc: dict[str, Any]) -> dict[str, Any]:
    doc.pop("digest", None)
    doc["digest"] = plan_digest(doc)
    return doc


def _edited(doc: dict[str, Any], adapter: Adapter) -> dict[str, Any]:
    doc["tables"][0]["actions"][0]["reason"] += " (edited)"
    return doc  # the digest no longer matches


def _cut_bins(doc: dict[str, Any], adapter: Adapter) -> dict[str, Any]:
    a = doc["tables"][0]["actions"][0]
    a["bins"] = a["bins"][:1]
    a["input_files"], a["expected_output_files"] = len(a["bins"][0]), 1
    return _resign(doc)


def _metadata_as_input(doc: dict[str, Any], adapter: Adapter) -> dict[str, Any]:
    """The format's own metadata named as a file to rewrite, every digest recomputed."""
    a = doc["tables"][0]["actions"][0]
    a["bins"][0][0] = adapter.metadata_file
    a["precondition"]["digest"] = digest_paths([p for b in a["bins"] for p in b])
    return _resign(doc)


def _bigger_target(doc: dict[str, Any], adapter: Adapter) -> dict[str, Any]:
    doc["tables"][0]["actions"][0]["params"]["target_file_size"] = 2 << 30
    return _resign(doc)


TAMPERINGS: dict[str, tuple[Callable[[dict[str, Any], Adapter], dict[str, Any]], str]] = {
    "edited": (_edited, "modified after `compactor plan`"),
    "cut_bins": (_cut_bins, "precondition digest"),
    "metadata_as_input": (_metadata_as_input, "no action may touch"),
    "bigger_target": (_bigger_target, "target_file_size"),
}


def _tree(root: Path) -> str:
    h = hashlib.sha256()
    for f in sorted(root.rglob("*")):
        h.update(str(f.relative_to(root)).encode())
        if f.is_file():
            h.update(f.read_bytes())
    return h.hexdigest()


@pytest.mark.parametrize("tampering", TAMPERINGS)
def test_an_edited_plan_is_refused_and_nothing_is_touched(lake: Lake, now: dt.datetime, tampering: str) -> None:
    plan = lake.plan(now)
    edit, message = TAMPERINGS[tampering]
    plan.write_text(json.dumps(edit(lake.doc(plan), lake.adapter)))
    before = _tree(lake.table)
    run = lake.apply(plan)
    assert run.exit_code == 2, run.output
    assert message in run.output and "Traceback" not in run.output, run.output
    assert _tree(lake.table) == before


def test_the_format_finds_its_table_at_its_path_and_under_a_root(lake: Lake) -> None:
    found = detect_at(str(lake.table))
    assert found is not None and found.format == lake.adapter.name and found.yielded == ()
    assert discover_tables(str(lake.root), fmt=lake.adapter.name) == ["lake/t"]
    others = [a.name for a in ADAPTERS if a.name != lake.adapter.name and format_spec(a.name) is not None]
    assert all(discover_tables(str(lake.root), fmt=o) == [] for o in others)
