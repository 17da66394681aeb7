"""An Iceberg table's state read from its manifests (formats/iceberg/state.py) matches pyiceberg's own
``inspect.files()``, for every kind of table, with its specs, schema, sort order and delete files."""

from __future__ import annotations

from pathlib import Path

import pytest

pytest.importorskip("pyiceberg", reason="pyiceberg is not installed (pip install 'compactor[iceberg]')")

from compactor.formats.iceberg.state import state_of  # noqa: E402
from tests.iceberg.tables import (  # noqa: E402
    APPENDS,
    KINDS,
    ROWS,
    commit_equality_delete,
    commit_position_deletes,
    make_table,
    upgrade_to_v3,
)


@pytest.mark.parametrize("kind", KINDS)
def test_state_matches_inspect_files(tmp_path: Path, kind: str) -> None:
    t = make_table(tmp_path, kind)
    st = state_of(t, f"db.{kind}")
    files = [r for r in t.inspect.files().to_pylist() if r["content"] == 0]
    assert len(st.files) == len(files) > 0
    by_path = {f.path: f for f in st.files}
    for r in files:
        f = by_path[r["file_path"]]
        assert (f.size, f.record_count, f.spec_id, f.file_format) == (
            r["file_size_in_bytes"], r["record_count"], r["spec_id"], r["file_format"])
        # inspect's partition struct spans every spec's fields (days as dates); the file's own spec's hold its values
        assert {v.name: v.text for v in f.partition} == {
            v.name: "null" if r["partition"][v.name] is None else str(r["partition"][v.name]) for v in f.partition}
    assert st.totals.records == APPENDS * ROWS == sum(f.record_count for f in st.files)
    assert st.totals.data_files == len(files)
    assert st.snapshot_id == t.current_snapshot().snapshot_id
    assert st.format_version == 2
    assert st.default_spec_id == t.spec().spec_id
    assert [c.name for c in st.columns] == [f.name for f in t.schema().fields]


def test_partitions_render_with_their_transforms(tmp_path: Path) -> None:
    t = make_table(tmp_path, "day")
    st = state_of(t, "db.day")
    assert {f.partition_path for f in st.files} == {"ts_day=2024-01-01", "ts_day=2024-01-02"}
    t = make_table(tmp_path, "bucket")
    assert {f.partition_path for f in state_of(t, "db.bucket").files} <= {f"id_bucket={b}" for b in range(4)}
    t = make_table(tmp_path, "identity_string")
    assert {f.partition_path for f in state_of(t, "db.identity_string").files} == {"cat=null", "cat=x", "cat=y"}


def test_two_specs_and_sort_order(tmp_path: Path) -> None:
    t = make_table(tmp_path, "two_specs")
    with t.update_sort_order() as s:
        from pyiceberg.transforms import IdentityTransform

        s.asc("id", IdentityTransform())
    st = state_of(t, "db.two_specs")
    assert [s.spec_id for s in st.specs] == [0, 1] and st.default_spec_id == 1
    assert [(p.name, p.source, p.transform) for p in st.spec(1).fields] == [("grp", "grp", "identity"),
                                                                           ("ts_day", "ts", "day")]
    assert {f.spec_id for f in st.files} == {0, 1}
    assert {f.partition_path for f in st.files if f.spec_id == 0} == {"grp=0", "grp=1"}
    assert all(f.partition_path.startswith("grp=") and "/ts_day=2024-01-0" in f.partition_path
               for f in st.files if f.spec_id == 1)
    assert [(f.source, f.direction) for f in st.sort_order.fields] == [("id", "asc")]


def test_schema_evolution_columns(tmp_path: Path) -> None:
    t = make_table(tmp_path, "schema_evolution")
    st = state_of(t, "db.schema_evolution")
    assert [(c.field_id, c.name) for c in st.columns][-2:] == [(7, "day"), (8, "extra")]
    assert "label" in [c.name for c in st.columns] and "cat" not in [c.name for c in st.columns]


def test_delete_files_per_data_file(tmp_path: Path) -> None:
    t = make_table(tmp_path, "identity_int")
    st = state_of(t, "db.identity_int")
    grp0 = [f.path for f in st.files if f.partition_path == "grp=0"]
    shared = commit_position_deletes(t, {grp0[0]: [0, 2], grp0[1]: [1]})  # one file naming two data files
    scoped = commit_position_deletes(t, {grp0[2]: [0]}, file_scoped=True)
    eq = commit_equality_delete(t, grp0[3], [36])
    st = state_of(t, "db.identity_int")
    deletes = {f.path: {d.path for d in f.deletes} for f in st.files}
    assert deletes[grp0[0]] == deletes[grp0[1]] == set(shared) | {eq}
    # the bounds-less delete file applies by partition (its rows are read to know which files it names); the
    # file-scoped one to its file only
    assert deletes[grp0[2]] == {*scoped, *shared, eq}
    assert deletes[grp0[3]] == {*shared, eq}
    assert all(not d for f, d in deletes.items() if f not in grp0)
    kinds = {d.path: d.kind for d in st.delete_files}
    assert kinds == {shared[0]: "position", scoped[0]: "position", eq: "equality"}
    assert (st.totals.position_delete_files, st.totals.equality_delete_files, st.totals.delete_records) == (2, 1, 5)
    files = t.inspect.files().to_pylist()
    assert {r["file_path"] for r in files if r["content"] != 0} == set(kinds)


def test_v3_table_state_reads(tmp_path: Path) -> None:
    t = make_table(tmp_path, "unpartitioned")
    t = upgrade_to_v3(tmp_path, t)
    st = state_of(t, "db.unpartitioned_v3")
    assert st.format_version == 3 and len(st.files) == APPENDS


def test_empty_table(tmp_path: Path) -> None:
    from tests.iceberg.tables import SCHEMA, catalog

    t = catalog(tmp_path).create_table("db.empty", schema=SCHEMA)
    st = state_of(t, "db.empty")
    assert st.snapshot_id is None and st.files == () and st.totals.records == 0
