"""The local rewrite of planned bins (formats/iceberg/rewrite.py) committed as one ``replace`` snapshot
(formats/iceberg/replace.py): the rows stay exactly the same multiset, the snapshot says ``replace``, time
travel to the planned snapshot still returns the old rows, exactly the planned files are replaced; a
commit whose files another writer touched since the planned snapshot is refused as stale and commits
nothing; what pyiceberg cannot do exactly is refused, naming why and the spark engine."""

from __future__ import annotations

from pathlib import Path

import pytest

pytest.importorskip("pyiceberg", reason="pyiceberg is not installed (pip install 'compactor[iceberg]')")

from compactor.errors import VerificationError  # noqa: E402
from compactor.formats.iceberg.replace import StaleReplaceError, replace  # noqa: E402
from compactor.formats.iceberg.rewrite import OutputNames, RewrittenBin, rewrite_bin  # noqa: E402
from compactor.formats.iceberg.state import IcebergState, state_of  # noqa: E402
from compactor.formats.iceberg.support import LocalEngineRefusal  # noqa: E402
from tests.iceberg.tables import (  # noqa: E402
    KINDS,
    append,
    bins_by_partition,
    commit_equality_delete,
    commit_position_deletes,
    make_table,
    overwrite_file,
    rows,
    upgrade_to_v3,
)


def _rewrite_all(t, st: IcebergState, **kw) -> list[RewrittenBin]:  # type: ignore[no-untyped-def]
    names = OutputNames()
    bins = bins_by_partition(f for f in st.files if f.spec_id == st.default_spec_id or kw.get("move_to_current_spec"))
    return [rewrite_bin(t, st, paths, names, **kw) for paths in bins]


@pytest.mark.parametrize("kind", KINDS)
def test_replace_keeps_rows_and_replaces_exactly_the_bins(tmp_path: Path, kind: str) -> None:
    t = make_table(tmp_path, kind)
    name = f"db.{kind}"
    before = rows(t)
    planned = state_of(t, name)
    bins = _rewrite_all(t, planned)
    assert bins and all(b.rows_out == b.rows_in for b in bins)
    result = replace(t, planned, bins, {"compactor.run": "test"})
    after = state_of(t, name)
    assert rows(t) == before
    snap = t.current_snapshot()
    assert snap.snapshot_id == result.snapshot_id and snap.parent_snapshot_id == planned.snapshot_id
    assert snap.summary.operation.value == "replace" and snap.summary["compactor.run"] == "test"
    assert rows(t, planned.snapshot_id) == before  # time travel to the planned snapshot
    removed = {p for b in bins for p in b.inputs}
    added = {b.output_path for b in bins}
    assert {f.path for f in after.files} == ({f.path for f in planned.files} - removed) | added
    assert len(set(added)) == len(bins)  # one output per bin, no two sharing a name
    assert all(f.spec_id == planned.default_spec_id for f in after.files if f.path in added)


def test_outputs_of_two_calls_do_not_collide(tmp_path: Path) -> None:
    """pyiceberg's writer names files 00000-<task>-<uuid>: one OutputNames per run counts across calls."""
    t = make_table(tmp_path, "unpartitioned")
    st = state_of(t, "db.unpartitioned")
    paths = [f.path for f in st.files]
    names = OutputNames()
    a = rewrite_bin(t, st, paths[:2], names)
    b = rewrite_bin(t, st, paths[2:], names)
    assert a.output_path != b.output_path
    before = rows(t)
    replace(t, st, [a, b])
    assert rows(t) == before


def test_an_append_after_planning_is_untouched(tmp_path: Path) -> None:
    t = make_table(tmp_path, "identity_int")
    planned = state_of(t, "db.identity_int")
    bins = _rewrite_all(t, planned)
    append(t, 99)
    appended = {f.path for f in state_of(t, "db.identity_int").files} - {f.path for f in planned.files}
    expected = rows(t)
    replace(t, planned, bins)
    now = {f.path for f in state_of(t, "db.identity_int").files}
    assert appended <= now and rows(t) == expected


@pytest.mark.parametrize("change", ["overwrite", "delete", "position_delete"])
def test_another_writer_touching_a_planned_file_makes_the_commit_stale(tmp_path: Path, change: str) -> None:
    t = make_table(tmp_path, "identity_int")
    planned = state_of(t, "db.identity_int")
    bins = _rewrite_all(t, planned)
    victim = bins[0].inputs[0]
    if change == "overwrite":
        overwrite_file(t, victim)
    elif change == "delete":
        first_id = t.scan().to_arrow()["id"][0].as_py()
        owner = next(f.path for f in state_of(t, "db.identity_int").files
                     if f.record_count and first_id in _ids(t, f.path))
        victim = owner
        t.delete(f"id = {first_id}")
    else:
        commit_position_deletes(t, {victim: [0]}, file_scoped=True)
    if not any(victim in b.inputs for b in bins):
        pytest.skip("the changed file is in no bin")  # cannot happen with these tables; kept honest
    head = t.current_snapshot().snapshot_id
    expected = rows(t)
    with pytest.raises(StaleReplaceError, match="not committed, the plan is stale"):
        replace(t, planned, bins)
    t.refresh()
    assert t.current_snapshot().snapshot_id == head and rows(t) == expected  # nothing committed


def _ids(t, path: str) -> set[int]:  # type: ignore[no-untyped-def]
    import pyarrow.parquet as pq

    return set(pq.read_table(t.io.new_input(path).open(), columns=["id"])["id"].to_pylist())


def test_position_deletes_are_applied_when_their_file_stays_live(tmp_path: Path) -> None:
    """A delete file naming a file of the bin and a file outside it stays live (it still deletes from the
    other); the bin's rows are read with its deletes applied and the output holds exactly the rest."""
    t = make_table(tmp_path, "identity_int")
    st = state_of(t, "db.identity_int")
    grp0 = [f.path for f in st.files if f.partition_path == "grp=0"]
    (delete,) = commit_position_deletes(t, {grp0[0]: [0, 1], grp0[3]: [2]})
    before = rows(t)
    planned = state_of(t, "db.identity_int")
    out = rewrite_bin(t, planned, grp0[:3], OutputNames())
    assert (out.rows_in, out.rows_deleted, out.rows_out) == (15, 2, 13)
    replace(t, planned, [out])
    assert rows(t) == before
    after = state_of(t, "db.identity_int")
    assert [d.path for d in after.file(grp0[3]).deletes] == [delete]
    assert not after.file(out.output_path or "").deletes  # newer than the delete file: it does not apply


def test_a_delete_file_only_the_bin_references_is_refused(tmp_path: Path) -> None:
    t = make_table(tmp_path, "identity_int")
    st = state_of(t, "db.identity_int")
    grp0 = [f.path for f in st.files if f.partition_path == "grp=0"]
    commit_position_deletes(t, {grp0[0]: [0]}, file_scoped=True)
    planned = state_of(t, "db.identity_int")
    names = OutputNames()
    with pytest.raises(LocalEngineRefusal, match="cannot remove delete files.*spark engine"):
        rewrite_bin(t, planned, grp0, names)
    assert not list((tmp_path / "warehouse").rglob(f"*{names.run_id}*"))  # nothing written


def test_equality_deletes_are_refused(tmp_path: Path) -> None:
    t = make_table(tmp_path, "identity_int")
    st = state_of(t, "db.identity_int")
    grp0 = [f.path for f in st.files if f.partition_path == "grp=0"]
    commit_equality_delete(t, grp0[0], [0])
    planned = state_of(t, "db.identity_int")
    with pytest.raises(LocalEngineRefusal, match="equality deletes.*spark engine"):
        rewrite_bin(t, planned, grp0, OutputNames())


def test_v3_tables_are_refused(tmp_path: Path) -> None:
    t = upgrade_to_v3(tmp_path, make_table(tmp_path, "unpartitioned"))
    st = state_of(t, "db.unpartitioned_v3")
    with pytest.raises(LocalEngineRefusal, match="format-version 3.*spark engine"):
        rewrite_bin(t, st, [f.path for f in st.files], OutputNames())


def test_older_spec_bins_move_to_the_current_spec_only_when_asked(tmp_path: Path) -> None:
    t = make_table(tmp_path, "two_specs")
    planned = state_of(t, "db.two_specs")
    old = [f.path for f in planned.files if f.spec_id == 0 and f.partition_path == "grp=0"]
    assert len(old) >= 2
    with pytest.raises(LocalEngineRefusal, match="partition spec 0.*spark engine"):
        rewrite_bin(t, planned, old, OutputNames())
    before = rows(t)
    # grp = id % 2 and the day is 1 + id % 2: the rows of grp=0 are in one partition of the current spec
    out = rewrite_bin(t, planned, old, OutputNames(), move_to_current_spec=True)
    replace(t, planned, [out])
    assert rows(t) == before
    moved = state_of(t, "db.two_specs").file(out.output_path or "")
    assert (moved.spec_id, moved.partition_path) == (1, "grp=0/ts_day=2024-01-01")


def test_a_bin_whose_rows_span_partitions_of_the_current_spec_is_not_written(tmp_path: Path) -> None:
    t = make_table(tmp_path, "unpartitioned")
    planned_paths = [f.path for f in state_of(t, "db.unpartitioned").files]
    with t.update_spec() as u:
        u.add_identity("grp")
    planned = state_of(t, "db.unpartitioned")
    names = OutputNames()
    with pytest.raises(VerificationError, match="2 partitions of the table's current spec"):
        rewrite_bin(t, planned, planned_paths, names, move_to_current_spec=True)
    assert not [p for p in (tmp_path / "warehouse").rglob(f"*{names.run_id}*")]  # its output was deleted
