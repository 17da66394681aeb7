"""An Iceberg table a policy names by path (its location: a Hadoop table, or any catalog's table) is planned
read-only from its newest metadata file, with no catalog: the same bins as through its catalog. Apply
refuses it in one line, exit 1, nothing changed (only a catalog commits to an Iceberg table). A location
with no metadata file is one line, exit 1."""

from __future__ import annotations

from pathlib import Path

import pytest

pytest.importorskip("pyiceberg", reason="pyiceberg is not installed (pip install 'compactor[iceberg]')")

from compactor.formats.iceberg.catalog import newest_metadata  # noqa: E402
from compactor.models.table import TableLocation  # noqa: E402
from tests.iceberg.project import COMPACTION, Project, profiles  # noqa: E402
from tests.iceberg.tables import append, make_table, rows  # noqa: E402


def _by_path(location: str) -> str:
    return ("version: 1\ntables:\n  - name: t\n    format: iceberg\n"
            f"    path: \"{location}\"\n    compaction: {COMPACTION}\n")


def test_a_table_named_by_path_plans_as_through_its_catalog_and_apply_refuses_it(tmp_path: Path) -> None:
    t = make_table(tmp_path, "identity_int")
    by_catalog = Project.make(tmp_path, "identity_int")
    assert by_catalog.cli("plan").exit_code == 0
    project = Project.make(tmp_path / "by_path", "identity_int", policy_text=_by_path(t.location()),
                           profiles_text=profiles(tmp_path))
    r = project.cli("validate")
    assert r.exit_code == 0, r.output
    r = project.cli("plan", "--detailed-exitcode")
    assert r.exit_code == 2, r.output
    assert project.table_plan()["version"] == by_catalog.table_plan()["version"]
    assert sorted(map(sorted, project.bins())) == sorted(map(sorted, by_catalog.bins()))

    head, before = t.current_snapshot(), rows(t)
    r = project.cli("apply", str(project.plan_file))
    assert r.exit_code == 1, r.output
    assert "Traceback" not in r.output and "planned read-only" in r.output
    assert {x["status"] for x in project.results()} == {"error"}
    t.refresh()
    assert t.current_snapshot() == head and rows(t) == before


def test_the_newest_metadata_file_is_the_one_read(tmp_path: Path) -> None:
    t = make_table(tmp_path, "unpartitioned")
    append(t, 7)
    t.refresh()
    assert newest_metadata(TableLocation(t.location())).removeprefix("file://") == \
        t.metadata_location.removeprefix("file://")


def test_a_location_without_iceberg_metadata_is_one_line(tmp_path: Path) -> None:
    (tmp_path / "empty" / "metadata").mkdir(parents=True)
    make_table(tmp_path, "unpartitioned")  # the catalog the project's target declares
    project = Project.make(tmp_path, "unpartitioned", policy_text=_by_path(str(tmp_path / "empty")))
    r = project.cli("plan")
    assert r.exit_code == 1, r.output
    assert "Traceback" not in r.output and "no Iceberg metadata file" in r.output
