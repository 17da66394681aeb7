"""A table's reference (compactor/models/table.py): its location, and for a table a catalog located, its
identifier there and that catalog's settings, from the policy through the plan file to every call apply
makes of the format. A plan written before plans recorded identifiers still loads and applies."""

from __future__ import annotations

import datetime as dt
import json
from collections.abc import Iterator
from pathlib import Path

import pyarrow as pa
import pytest

from compactor.models.catalog import CatalogSettings, CatalogTable
from compactor.models.formats import register_format
from compactor.models.table import TableIdentifier, TableLocation
from compactor.planning.integrity import plan_problems
from compactor.planning.plan import Plan, TablePlan, plan_digest
from compactor.policy.model import Compaction, Discover, TablePolicy, Triggers
from compactor.project.model import Target
from compactor.tasks.apply import apply_plan
from compactor.tasks.catalog_tables import catalog_policies
from compactor.tasks.plan import build_plan, read_state
from compactor.tasks.plan_file import load_plan, write_plan
from compactor.tasks.saved_plan import pinned_policies
from tests.formats import recording
from tests.formats.contract import toy_format

MAIN = CatalogSettings("main", "glue", {"region": "eu-west-1", "aws_secret_access_key": "s3cr3t-value"})
TARGET = Target(catalogs={"main": MAIN})
NAMED = TableIdentifier("main", "sales", "orders")


@pytest.fixture
def fmt() -> Iterator[recording.RecordingFormat]:
    with register_format(recording.SPEC):
        found = recording.FORMAT
        assert isinstance(found, recording.RecordingFormat)
        found.seen.clear()
        yield found


def _table(path: Path) -> str:
    path.mkdir(parents=True)
    where = TableLocation(str(path))
    toy_format.create(where)
    for i in range(3):
        toy_format.append(where, pa.table({"id": list(range(i * 10, i * 10 + 10))}))
    return str(path)


def _policy(path: str, catalog: TableIdentifier | None) -> TablePolicy:
    return TablePolicy(name="orders", format=recording.NAME, path=path, catalog=catalog,
                       compaction=Compaction(target_file_size=2**20, min_file_size=2**19,
                                             triggers=Triggers(min_input_files=2)))


def test_a_catalog_table_reaches_its_format_with_its_identifier_and_catalog(fmt: recording.RecordingFormat,
                                                                          tmp_path: Path) -> None:
    policy = _policy(_table(tmp_path / "t"), NAMED)
    state = read_state(policy, TARGET)
    assert not isinstance(state, Exception), state
    plan = build_plan([policy], {"orders": state}, now=dt.datetime.now(dt.UTC), target=TARGET, project_name="p")
    assert plan.tables[0].identifier == NAMED and plan.tables[0].actions
    saved = write_plan(plan, tmp_path / "plan.json")
    doc = json.loads(saved.read_text())
    assert doc["tables"][0]["identifier"] == {"catalog": "main", "namespace": "sales", "table": "orders"}
    assert "s3cr3t-value" not in saved.read_text()
    loaded = load_plan(saved)
    assert loaded.tables[0].identifier == NAMED
    assert plan_problems(loaded, "p", [policy], TARGET.engine) == []

    run = apply_plan(loaded, target=TARGET)
    assert [r.status for r in run.results] == ["success"], run.results
    calls = [c for c, _ in fmt.seen]
    assert calls == ["read_state", "recover", "open_session", "read_state", "run"]
    for _, ref in fmt.seen:  # every reference compactor made: the same location, identifier and catalog
        assert (ref.uri, ref.identifier, ref.catalog) == (policy.path, NAMED, MAIN)
        assert "s3cr3t-value" not in repr(ref)


def test_a_plan_written_before_identifiers_loads_and_applies_by_location(fmt: recording.RecordingFormat,
                                                                        tmp_path: Path) -> None:
    policy = _policy(_table(tmp_path / "t"), NAMED)
    state = read_state(policy, TARGET)
    assert not isinstance(state, Exception), state
    plan = build_plan([policy], {"orders": state}, now=dt.datetime.now(dt.UTC), target=TARGET, project_name="p")
    doc = json.loads(write_plan(plan, tmp_path / "plan.json").read_text())
    for t in doc["tables"]:  # as the previous release wrote it: no identifier, digest over what it wrote
        t.pop("identifier")
    doc.pop("digest")
    doc["digest"] = plan_digest(doc)
    (tmp_path / "old.json").write_text(json.dumps(doc))
    old = load_plan(tmp_path / "old.json")
    assert old.tables[0].identifier is None
    assert plan_problems(old, "p", [policy], TARGET.engine) == []  # the policy's catalog is no contradiction
    fmt.seen.clear()
    run = apply_plan(old, target=TARGET)
    assert [r.status for r in run.results] == ["success"], run.results
    assert {(ref.uri, ref.identifier, ref.catalog) for _, ref in fmt.seen} == {(policy.path, None, None)}


def test_a_plan_naming_another_catalog_table_than_its_policy_is_refused(fmt: recording.RecordingFormat,
                                                                        tmp_path: Path) -> None:
    policy = _policy(_table(tmp_path / "t"), NAMED)
    state = read_state(policy, TARGET)
    assert not isinstance(state, Exception), state
    plan = build_plan([policy], {"orders": state}, now=dt.datetime.now(dt.UTC), target=TARGET, project_name="p")
    other = TableIdentifier("main", "sales", "returns")
    assert plan_problems(plan, "p", [_policy(policy.path or "", other)], TARGET.engine) == [
        "table 'orders': the plan names catalog table main.sales.orders, the policy names main.sales.returns"]
    assert plan_problems(plan, "p", [_policy(policy.path or "", None)], TARGET.engine) == [
        "table 'orders': the plan names catalog table main.sales.orders, the policy names none"]


class _Listed:
    """A catalog that lists the tables it was given (the Catalog protocol, compactor/catalogs/base.py)."""

    name = "main"

    def __init__(self, tables: list[CatalogTable]) -> None:
        self.tables = tables

    def list_tables(self, namespace: str) -> list[CatalogTable]:
        return [t for t in self.tables if t.namespace == namespace]

    def get_table(self, namespace: str, name: str) -> CatalogTable:
        return next(t for t in self.tables if (t.namespace, t.name) == (namespace, name))


def test_a_discover_over_a_catalog_names_each_table_and_a_saved_plan_pins_it(tmp_path: Path) -> None:
    listed = _Listed([CatalogTable("main", "sales", "orders", str(tmp_path / "o"), "delta"),
                      CatalogTable("main", "sales", "ice", str(tmp_path / "i"), None, "an Iceberg table")])
    p = TablePolicy(name="sales", discover=Discover(catalog="main", namespace="sales"))
    unsupported: dict[str, Exception] = {}
    found = catalog_policies(p, TARGET, {"main": listed}, unsupported)
    assert [(q.name, q.path, q.catalog) for q in found] == [
        ("sales/orders", str(tmp_path / "o"), NAMED), ("sales/ice", str(tmp_path / "i"), None)]
    assert list(unsupported) == ["sales/ice"]
    plan = Plan("x", "2026-01-01T00:00:00Z", "p", {}, tables=(
        TablePlan("sales/orders", str(tmp_path / "o"), "delta", "local", 1, identifier=NAMED),
        TablePlan("sales/older", str(tmp_path / "old"), "delta", "local", 1)))  # pinned before identifiers
    assert [(q.name, q.path, q.catalog) for q in pinned_policies([p], plan)] == [
        ("sales/orders", str(tmp_path / "o"), NAMED), ("sales/older", str(tmp_path / "old"), None)]
