"""The deletion gate of an Iceberg table (formats/iceberg/references.py): discarding outputs deletes only
files no snapshot in the table's metadata references, read again at the moment of deleting."""

from __future__ import annotations

from pathlib import Path

import pytest

pytest.importorskip("pyiceberg", reason="pyiceberg is not installed (pip install 'compactor[iceberg]')")

from compactor.formats.iceberg.references import IcebergReferences, delete_unreferenced  # noqa: E402
from compactor.formats.iceberg.rewrite import discard  # noqa: E402
from compactor.runtime.storage import locate  # noqa: E402
from tests.iceberg.tables import append, make_table, overwrite_file, rows  # noqa: E402


def _local(uri: str) -> Path:
    return Path("/" + locate(uri)[1])


def test_discard_keeps_every_file_a_snapshot_names_and_deletes_the_rest(tmp_path: Path) -> None:
    t = make_table(tmp_path, "identity_int")
    for i in range(2):
        append(t, i)
    live = [str(task.file.file_path) for task in t.scan().plan_files()]
    stray = _local(live[0]).parent / "00000-99-stray.parquet"
    stray.write_bytes(_local(live[0]).read_bytes())
    before = sorted(rows(t))
    done = delete_unreferenced(t, [*live, f"file://{stray}"])
    assert not stray.exists() and done.deleted == (locate(f"file://{stray}")[1],)
    assert all(_local(p).exists() for p in live) and set(done.kept) == {locate(p)[1] for p in live}
    assert sorted(rows(t)) == before


def test_a_file_only_an_older_snapshot_names_is_kept(tmp_path: Path) -> None:
    """Time travel reads it: a file an overwrite removed is referenced by the snapshot before it."""
    t = make_table(tmp_path, "unpartitioned")
    append(t, 0)
    old = str(next(iter(t.scan().plan_files())).file.file_path)
    overwrite_file(t, old)
    t = t.refresh()
    assert old not in {str(task.file.file_path) for task in t.scan().plan_files()}
    discard(t, [old])
    assert _local(old).exists()
    kept = IcebergReferences(t).kept([locate(old)[1]], [locate(old)[1].rsplit("/", 1)[0]])
    assert set(kept.values()) == {"a snapshot in the table's metadata references it",
                                  "the folder holds files the table references"}
