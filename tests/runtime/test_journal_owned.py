"""The journal's ``owned`` folders (runtime/journal.py): a folder compactor created for one run's writer,
which names its files itself (the spark engine's Iceberg rewrite). Recovery of an ended entry deletes every
file in it that the table does not reference, through the table's deletion gate, and keeps a file the table
references; an entry naming anything else as owned (a table's log, compactor's state, a parent folder, a
folder not named ``compactor-<token>``) is a damaged or edited entry and deletes nothing. Proved on a real
delta-rs table with Delta's gate (its log replay)."""

from __future__ import annotations

from pathlib import Path

import pyarrow as pa
import pytest
from deltalake import DeltaTable, write_deltalake

from compactor.formats import get_format
from compactor.models.table import TableLocation
from compactor.runtime import clock
from compactor.runtime.journal import JournalEntry, adopt, is_owned_folder, live_entries

TOKEN = "compactor-" + "a" * 32


def _table(tmp_path: Path) -> Path:
    root = tmp_path / "t"
    write_deltalake(str(root), pa.table({"id": pa.array([1, 2, 3], pa.int64())}))
    return root


def _ended(root: Path, owned: list[str]) -> None:
    now = clock.wall()
    adopt(str(root), JournalEntry("run", "a-0", str(root), 0, owned=owned, started_at=now - 60,
                                  heartbeat_at=now - 60, ended_at=now - 50))


def _recover(root: Path) -> list[str]:
    return get_format("delta").recover(TableLocation(str(root)), grace_s=0.0)


def test_an_ended_entry_deletes_its_owned_folders_unreferenced_files_and_keeps_the_tables(tmp_path: Path) -> None:
    root = _table(tmp_path)
    folder = root / TOKEN / "p=1"
    folder.mkdir(parents=True)
    (folder / "00000-1-x-00001.parquet").write_bytes(b"written, never committed")
    (folder / ".00000-1-x-00001.parquet.crc").write_bytes(b"crc")
    write_deltalake(str(root), pa.table({"id": pa.array([9], pa.int64())}), mode="append")
    rows_before = DeltaTable(str(root)).to_pyarrow_table().num_rows
    log_files = sorted((root / "_delta_log").iterdir())
    _ended(root, [TOKEN])

    deleted = _recover(root)
    # the uncommitted output goes; a hidden name (the .crc) is kept by Delta's gate, stricter than the rule
    assert deleted == [f"{TOKEN}/p=1/00000-1-x-00001.parquet"]
    assert not (folder / "00000-1-x-00001.parquet").exists()
    assert DeltaTable(str(root)).to_pyarrow_table().num_rows == rows_before
    assert sorted((root / "_delta_log").iterdir()) == log_files
    assert live_entries(str(root)) == []


@pytest.mark.parametrize("owned", ["_delta_log", "_compactor", "", "..", "compactor-short", "data/other",
                                   "/abs/compactor-" + "b" * 32, f"_delta_log/{TOKEN}"])
def test_an_entry_naming_anything_else_as_owned_deletes_nothing(tmp_path: Path, owned: str) -> None:
    assert not is_owned_folder(owned)
    root = _table(tmp_path)
    stray = root / "data" / "other" / "x.parquet"
    stray.parent.mkdir(parents=True)
    stray.write_bytes(b"not compactor's")
    files = sorted(p for p in root.rglob("*") if p.is_file() and "_compactor" not in p.parts)
    _ended(root, [owned])

    assert _recover(root) == []
    assert sorted(p for p in root.rglob("*") if p.is_file() and "_compactor" not in p.parts) == files
