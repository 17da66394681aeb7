"""The one commit path: re-check before committing, found again by its marker, paths encoded once."""

from __future__ import annotations

import json
import shutil
import time
from pathlib import Path

import pyarrow as pa
import pytest
from deltalake import DeltaTable, write_deltalake

from compactor.errors import StalePlanError
from compactor.formats.delta.apply.commit import NewFile, RemovedFile, commit_swap, new_file_name
from compactor.formats.delta.read.state import read_delta_state
from compactor.models.table import TableLocation
from tests.apply.helpers import ids

AWKWARD = ["a b", "x/y", "k=v", "100%", "é€", "plain"]


def _swap_one(t: Path, state, path: str, marker: str) -> object:
    """Copy one live file to a new name in its folder and swap it in through commit_swap."""
    row = next(r for r in state.files.to_pylist() if r["path"] == path)
    folder = path.rsplit("/", 1)[0] if "/" in path else ""
    new = new_file_name(folder)
    shutil.copyfile(t / path, t / new)
    pv = {c: row[f"partition.{c}"] for c in state.partition_columns}
    dt_ = DeltaTable(str(t))
    return commit_swap(dt_, TableLocation(str(t)), read_version=state.version,
                       removed=[RemovedFile(path, row["size_bytes"], pv, row["num_records"])],
                       added=[NewFile(new, (t / new).stat().st_size, pv, json.dumps({"numRecords": row["num_records"]}),
                                      row["num_records"])],
                       commit_metadata={"compactor.action": marker})


def test_paths_that_need_url_encoding_are_swapped_exactly(tmp_path: Path) -> None:
    """The log stores paths URL-encoded; commit_swap takes them decoded (delta-rs encodes them once):
    every remove matches its add, so no row is duplicated or lost."""
    t = tmp_path / "t"
    write_deltalake(str(t), pa.table({"s": AWKWARD, "id": pa.array(range(6), pa.int64())}), partition_by=["s"])
    state = read_delta_state(TableLocation(str(t)))
    for i, path in enumerate(sorted(state.paths)):
        assert (t / path).is_file(), path  # the state's path names the file on disk
        own = _swap_one(t, read_delta_state(TableLocation(str(t))), path, f"m{i}")
        assert set(own.removes) == {path}
    assert sorted(ids(t).items()) == [(i, 1) for i in range(6)]
    after = read_delta_state(TableLocation(str(t)))
    assert after.file_count == 6 and not (after.paths & state.paths)
    assert sorted(after.files.column("partition.s").to_pylist()) == sorted(AWKWARD)


def test_a_file_removed_since_the_read_version_refuses_the_commit(tmp_path: Path) -> None:
    t = tmp_path / "t"
    for i in range(3):
        write_deltalake(str(t), pa.table({"id": pa.array([i], pa.int64())}), mode="append")
    state = read_delta_state(TableLocation(str(t)))
    victim = sorted(state.paths)[0]
    _swap_one(t, state, victim, "other-tool")  # someone else rewrote it meanwhile
    version = DeltaTable(str(t)).version()
    with pytest.raises(StalePlanError, match="removed by a concurrent commit"):
        _swap_one(t, state, victim, "ours")
    assert DeltaTable(str(t)).version() == version
    assert sorted(ids(t).elements()) == [0, 1, 2]


def test_the_commit_carries_the_metadata_it_is_found_by(tmp_path: Path) -> None:
    t = tmp_path / "t"
    write_deltalake(str(t), pa.table({"id": pa.array([1, 2], pa.int64())}))
    state = read_delta_state(TableLocation(str(t)))
    own = _swap_one(t, state, sorted(state.paths)[0], f"run:{time.time()}")
    assert own.version == state.version + 1 and not own.data_change
    assert own.metadata("compactor.action").startswith("run:")
