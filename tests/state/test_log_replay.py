"""compactor's own replay of a Delta log (formats/delta/read/log_replay.py), which the deletion gate trusts
instead of another library's list: its live files equal delta-rs' on every table delta-rs reads (the
fixture corpus, delta-rs tables with partition values that need escaping, with and without a checkpoint),
deletion vector descriptors resolve as PROTOCOL.md's examples say, and what it cannot read with certainty
(a gap in the commits, a catalog-managed table) is an error, never a smaller set of references."""

from __future__ import annotations

import shutil
from pathlib import Path

import pyarrow as pa
import pytest
from deltalake import DeltaTable, write_deltalake

from compactor.errors import TableReadError
from compactor.formats.delta.read.log_paths import dv_file, z85_uuid
from compactor.formats.delta.read.log_replay import replay
from compactor.formats.delta.read.state import read_delta_state
from compactor.models.table import TableLocation
from tests.conftest import fixture_dirs

CORPUS = [d for d in fixture_dirs("delta-golden", "delta-misc", "delta-rs") if (d / "_delta_log").is_dir()]


def _live(path: Path | str) -> set[str]:
    return {key[0] for key in replay(TableLocation(str(path))).live}


@pytest.mark.parametrize("table", CORPUS, ids=[d.name for d in CORPUS])
def test_the_replay_finds_the_live_files_delta_rs_finds(table: Path) -> None:
    """Where delta-rs reads the table, the same live files; where the log is broken in a way that hides
    references (a gap, no metadata, a catalog holding the newest commits), an error too."""
    try:
        expected = set(read_delta_state(TableLocation(str(table))).paths)
    except TableReadError as e:
        if any(k in str(e) for k in ("contiguous", "metadata", "catalog")):
            with pytest.raises(TableReadError):
                replay(TableLocation(str(table)))
        return  # otherwise delta-rs refuses the protocol's form, which says nothing about the references
    assert _live(table) == expected


def test_deletion_vector_files_resolve_as_the_protocol_says() -> None:
    """PROTOCOL.md's examples: a random prefix and a base85 UUID; an absolute path; inline."""
    assert str(z85_uuid("^-aqEH.-t@S}K{vb[*k^")) == "d2c639aa-8816-431a-aaf6-d3fe2512ff61"
    u = dv_file({"storageType": "u", "pathOrInlineDv": "ab^-aqEH.-t@S}K{vb[*k^"}, "s3://mytable")
    assert u is not None and u.path == "ab/deletion_vector_d2c639aa-8816-431a-aaf6-d3fe2512ff61.bin"
    p = dv_file({"storageType": "p", "pathOrInlineDv": "s3a://mytable/deletion_vector_d2c639aa-8816-431a-aaf6-d3fe2512ff61.bin"},
                "s3://mytable")
    assert p is not None and p.path == "deletion_vector_d2c639aa-8816-431a-aaf6-d3fe2512ff61.bin" and p.uuid == u.uuid
    outside = dv_file({"storageType": "p", "pathOrInlineDv": "file:/other/deletion_vector_d2c639aa-8816-431a-aaf6-d3fe2512ff61.bin"},
                      "/tables/t")
    assert outside is not None and outside.path.startswith("file:/other/")
    assert dv_file({"storageType": "i", "pathOrInlineDv": "wi5b=000010000siXQKl0rr91000f55c8Xg0@@D72lkbi5=-{L"},
                   "/t") is None
    with pytest.raises(ValueError):
        z85_uuid("not twenty characters")


@pytest.mark.parametrize("checkpoint", [False, True])
def test_paths_that_need_escaping_replay_as_storage_names_them(tmp_path: Path, checkpoint: bool) -> None:
    """delta-rs writes the folder ``v=a%20b`` for the value "a b" and logs it encoded again (``a%2520b``):
    the replay's paths are the names on storage, from commits and from a checkpoint alike."""
    t = tmp_path / "t"
    values = ["a b", "50%", "a/b", "ünï", "x=y"]
    for k in range(3):
        write_deltalake(str(t), pa.table({"v": values, "id": pa.array(range(k * 5, k * 5 + 5), pa.int64())}),
                        partition_by=["v"], mode="append")
    DeltaTable(str(t)).optimize.compact()
    if checkpoint:
        DeltaTable(str(t)).create_checkpoint()
        write_deltalake(str(t), pa.table({"v": ["a b"], "id": pa.array([99], pa.int64())}), partition_by=["v"],
                        mode="append")
    state = replay(TableLocation(str(t)))
    on_storage = {p.relative_to(t).as_posix() for p in t.rglob("*.parquet") if "_delta_log" not in p.parts}
    assert {k[0] for k in state.live} == set(read_delta_state(TableLocation(str(t))).paths)
    assert {k[0] for k in state.live} | {k[0] for k in state.tombstones} == on_storage


def test_a_gap_in_the_commits_is_an_error_not_fewer_references(tmp_path: Path) -> None:
    t = tmp_path / "t"
    for k in range(3):
        write_deltalake(str(t), pa.table({"id": pa.array([k], pa.int64())}), mode="append")
    (t / "_delta_log" / "00000000000000000001.json").unlink()
    with pytest.raises(TableReadError, match="commit 1 is missing"):
        replay(TableLocation(str(t)))


def test_a_catalog_managed_table_is_an_error(fixtures_dir: Path, tmp_path: Path) -> None:
    t = tmp_path / "t"
    shutil.copytree(fixtures_dir / "delta-misc" / "catalog-owned-preview", t)
    with pytest.raises(TableReadError, match="catalog"):
        replay(TableLocation(str(t)))


def test_a_feature_the_replay_does_not_know_is_an_error(tmp_path: Path) -> None:
    """A table feature newer than compactor may reference files some other way: nothing of it is deleted."""
    t = tmp_path / "t"
    write_deltalake(str(t), pa.table({"id": pa.array([1], pa.int64())}))
    (t / "_delta_log" / "00000000000000000001.json").write_text(
        '{"protocol":{"minReaderVersion":3,"minWriterVersion":7,"readerFeatures":[],"writerFeatures":["futureFiles"]}}\n')
    with pytest.raises(TableReadError, match="futureFiles"):
        replay(TableLocation(str(t)))
