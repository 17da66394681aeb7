"""Every Delta fixture either plans or is reported unreadable with a reason - never a crash."""

from __future__ import annotations

import datetime as dt
from pathlib import Path

import pytest

from compactor.errors import TableReadError
from compactor.formats.delta.read.state import read_delta_state
from compactor.models.table import TableLocation
from compactor.policy.model import TablePolicy
from compactor.project.model import Target
from compactor.tasks.plan import build_plan
from tests.conftest import FIXTURES, FIXTURES_MISSING, fixture_dirs

DELTA_FIXTURES = fixture_dirs("delta-golden", "delta-misc", "delta-rs")
# the INDEX.md records which fixtures delta-rs 1.6.6 cannot open
UNREADABLE = {"deltalog-invalid-protocol-version", "deltalog-state-reconstruction-from-checkpoint-missing-metadata",
              "versions-not-contiguous", "catalog-owned-preview"}


@pytest.mark.skipif(not FIXTURES.is_dir(), reason=FIXTURES_MISSING)
def test_fixture_list_is_complete():
    assert len(DELTA_FIXTURES) >= 40


# without the corpus: one parameter, skipped with the reason (pytest's own "got empty parameter set" says
# nothing about what is missing)
FIXTURE_PARAMS = ([pytest.param(p, id=p.name) for p in DELTA_FIXTURES]
                  or [pytest.param(None, id="no-fixtures", marks=pytest.mark.skip(reason=FIXTURES_MISSING))])


@pytest.mark.parametrize("path", FIXTURE_PARAMS)
@pytest.mark.parametrize("engine", ["local", "spark"])
def test_fixture_plans_or_is_unreadable(path: Path, engine: str) -> None:
    try:
        state: object = read_delta_state(TableLocation(str(path)))
    except TableReadError as e:
        assert path.name in UNREADABLE, f"unexpectedly unreadable: {e}"
        assert str(path) in str(e) and len(str(e)) > len(str(path)) + 5  # says which table and why
        state = e
    else:
        assert path.name not in UNREADABLE
        assert state.version is not None and state.files.num_rows >= 0
    policy = TablePolicy(name=path.name, path=str(path))
    plan = build_plan([policy], {path.name: state}, now=dt.datetime.now(dt.UTC),
                      target=Target(engine=engine), project_name="fixtures")
    t = plan.tables[0]
    if isinstance(state, Exception):
        assert t.error and [s.reason for s in t.skipped] == ["unreadable"]
    else:
        assert t.error is None
        assert t.files_before == state.file_count
        reasons = {s.reason for s in t.skipped}
        assert t.actions or reasons, "every table either has actions or says why not"


def test_unsupported_fixture_reasons_name_the_feature(fixtures_dir: Path) -> None:
    state = read_delta_state(TableLocation(str(fixtures_dir / "delta-rs" / "table_with_liquid_clustering")))
    plan = build_plan([TablePolicy(name="x", path="x")], {"x": state}, now=dt.datetime.now(dt.UTC),
                      target=Target(), project_name="p")
    (skip,) = plan.tables[0].skipped
    assert skip.reason == "unsupported" and "rowTracking" in skip.message


def test_missing_and_not_delta_paths(tmp_path: Path) -> None:
    with pytest.raises(TableReadError, match="does not exist"):
        read_delta_state(TableLocation(str(tmp_path / "nope")))
    (tmp_path / "plain").mkdir()
    with pytest.raises(TableReadError, match="not a Delta table"):
        read_delta_state(TableLocation(str(tmp_path / "plain")))


def test_deletion_vector_presence_is_only_claimed_when_certain(fixtures_dir: Path) -> None:
    # DVs in files delta-rs cannot resolve: the log's descriptors still say which files carry one, and how
    # many rows each deletes (their cardinality)
    where = TableLocation(str(fixtures_dir / "delta-misc" / "partitioned-table-with-dv-large"))
    logged = read_delta_state(where)
    assert logged.extra.deletion_vectors_enabled is True and logged.extra.has_deletion_vectors is True
    assert sorted(logged.extra.deleted_rows.values()) == [1, 1, 1, 2, 2, 3, 4]
    assert sum(logged.files.column("deleted_rows").to_pylist()) == 14
    assert set(logged.extra.deletion_vectors) == set(logged.extra.deleted_rows)
    # at an older version than the log's newest, neither delta-rs nor the log's replay answers: unknown
    unknown = read_delta_state(where, version=3)
    assert unknown.extra.has_deletion_vectors is None and "deleted_rows" not in unknown.files.column_names
    known = read_delta_state(TableLocation(str(fixtures_dir / "delta-rs" / "table-with-dv-small")))
    assert known.extra.has_deletion_vectors is True
    (path,) = known.extra.deleted_rows
    assert path in known.paths and known.extra.deleted_rows[path] == 2
    assert known.files.column("deleted_rows").to_pylist() == [2]
    plain = read_delta_state(TableLocation(str(fixtures_dir / "delta-rs" / "simple_table")))
    assert plain.extra.has_deletion_vectors is False and plain.extra.deletion_vectors_enabled is False
    assert not plain.extra.deleted_rows and "deleted_rows" not in plain.files.column_names
