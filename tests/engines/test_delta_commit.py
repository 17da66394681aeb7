"""The rewrite journal: what a killed Spark rewrite wrote is removed, what the log references is kept."""

from __future__ import annotations

from pathlib import Path

import pyarrow as pa
from deltalake import DeltaTable, write_deltalake

from compactor.engines import delta_commit


def test_clean_journals_removes_only_uncommitted_files(tmp_path: Path) -> None:
    t = tmp_path / "t"
    write_deltalake(str(t), pa.table({"x": [1, 2]}))
    live = set(DeltaTable(str(t)).file_uris())
    live_rel = {Path(u.removeprefix("file://")).relative_to(t).as_posix() for u in live}
    orphan = delta_commit.new_file_name("")
    (t / orphan).write_bytes(b"not committed")
    staging = t / "_compactor_staging_x_0"
    staging.mkdir()
    (staging / "part-0.parquet").write_bytes(b"half written")
    delta_commit.write_journal(str(t), "run1", {"files": [orphan, *live_rel], "staging": [staging.name]})
    assert delta_commit.pending_journals(str(t)) == ["run1"]

    removed = delta_commit.clean_journals(str(t), None, live_rel)

    assert removed == 1
    assert not (t / orphan).exists() and not staging.exists()
    assert all((t / p).exists() for p in live_rel)
    assert delta_commit.pending_journals(str(t)) == []
    assert DeltaTable(str(t)).to_pyarrow_table().num_rows == 2


def test_new_file_names_are_unique_and_inside_the_partition() -> None:
    a, b = delta_commit.new_file_name("day=1"), delta_commit.new_file_name("day=1")
    assert a != b and a.startswith("day=1/part-") and a.endswith("-compactor.c000.snappy.parquet")
    assert "/" not in delta_commit.new_file_name("")
