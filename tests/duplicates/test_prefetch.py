"""Planning parses the newest commits while delta-rs loads the table (prefetch_window): the scan for rows
live twice must find exactly what it finds without that head start, also when commits land in between,
and a table whose log cannot be listed gives no head start rather than an error."""

from __future__ import annotations

from pathlib import Path

import pyarrow as pa
from deltalake import DeltaTable, write_deltalake

from compactor.formats.delta.detection import detect, prefetch_window, read_window
from compactor.models.table import TableLocation


def _append(path: Path, n: int) -> None:
    write_deltalake(str(path), pa.table({"id": pa.array(range(n), pa.int64())}), mode="append")


def test_prefetched_commits_are_the_commits_read_and_later_ones_are_read_as_usual(tmp_path: Path) -> None:
    for i in range(4):
        _append(tmp_path, i + 1)
    table = TableLocation(str(tmp_path))
    known = prefetch_window(table)
    assert sorted(known) == [0, 1, 2, 3]
    for _ in range(3):  # commits land after the head start
        _append(tmp_path, 10)
    DeltaTable(str(tmp_path)).optimize.compact()  # a rewrite after it: its removes must be seen
    latest = DeltaTable(str(tmp_path)).version()
    with_head_start = read_window(table, until=latest, known=known)
    plain = read_window(table, until=latest)
    assert [c.version for c in with_head_start] == list(range(latest + 1))
    assert [(c.version, c.adds, c.removes, c.info) for c in with_head_start] == \
        [(c.version, c.adds, c.removes, c.info) for c in plain]
    a, b = detect(table, version=latest, known=known), detect(table, version=latest)
    assert (a.first_version, a.version, [r.version for r in a.history]) == \
        (b.first_version, b.version, [r.version for r in b.history])


def test_a_window_ending_before_the_head_start_ignores_the_newer_commits(tmp_path: Path) -> None:
    for _ in range(5):
        _append(tmp_path, 2)
    known = prefetch_window(TableLocation(str(tmp_path)))
    window = read_window(TableLocation(str(tmp_path)), until=2, known=known)
    assert [c.version for c in window] == [0, 1, 2]


def test_no_log_to_list_gives_no_head_start(tmp_path: Path) -> None:
    assert prefetch_window(TableLocation(str(tmp_path / "missing"))) == {}
