"""Detection on every store root (local disk, S3, Azure): discover lists each folder once, as it did before
formats detected themselves (one delimiter listing per folder on an object store, whatever number of
formats is registered), and a bare path is detected without listing the table's root (which may hold a
million files). The store is real; the spy only counts the listings the backend makes."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest

from compactor.formats.discover import detect_at, discover_tables
from compactor.models.formats import register_format
from compactor.models.table import TableLocation
from compactor.runtime.storage import Storage, storage_for
from tests.formats.contract import toy_format
from tests.objectstore.helpers import make_table


@pytest.fixture
def listings(store_root: Any, monkeypatch: pytest.MonkeyPatch) -> Iterator[list[str]]:
    """The prefixes the store root's backend lists (with a delimiter), in order."""
    seen: list[str] = []
    backend = type(storage_for(store_root.uri, store_root.storage_options))
    real = backend.list_dir

    def counted(self: Storage, prefix: str = "") -> Any:
        seen.append(f"{self.uri.rstrip('/')}/{prefix.strip('/')}".rstrip("/"))
        return real(self, prefix)

    monkeypatch.setattr(backend, "list_dir", counted)
    yield seen


def test_discover_lists_each_folder_once_and_a_bare_path_lists_no_table_root(store_root: Any,
                                                                               listings: list[str]) -> None:
    so = store_root.storage_options
    lake = store_root.child("lake")
    make_table(f"{lake}/sales/orders", so, partitions=2, appends=1, rows=2)
    st = storage_for(lake, so)
    st.write_bytes("ops/clicks/_spark_metadata/0", b"v1\n")
    st.write_bytes("ops/clicks/part=0/a.parquet", b"x")
    st.write_bytes("raw/readme.txt", b"not a table")
    partitions = ("sales/orders/date=2024-01-01", "sales/orders/date=2024-01-02")
    folders = ["", "sales", "sales/orders", "ops", "ops/clicks", "ops/clicks/part=0", "toy", "toy/t", "raw"]
    with register_format(toy_format.SPEC):
        toy_format.create(TableLocation(f"{lake}/toy/t", so))
        for fmt, tables, listed in (
                ("delta", ["sales/orders"], folders),
                ("toy", ["toy/t"], [*folders, *partitions]),  # a Delta table is listed like any folder
                ("spark_file_sink", ["ops/clicks"], [*(f for f in folders if f != "ops/clicks/part=0"), *partitions])):
            listings.clear()
            assert discover_tables(lake, storage_options=so, fmt=fmt) == tables
            if store_root.backend != "local":  # local disk is walked with os.walk: one scandir per folder
                assert sorted(listings) == sorted(f"{lake}/{f}".rstrip("/") for f in listed), fmt  # each once
        listings.clear()
        found = {t: detect_at(f"{lake}/{t}", so) for t in ("sales/orders", "ops/clicks", "toy/t")}
        assert {t: d.format if d else None for t, d in found.items()} == {
            "sales/orders": "delta", "ops/clicks": "spark_file_sink", "toy/t": "toy"}
        assert not {p for p in listings if p in {f"{lake}/{t}" for t in found}}, listings  # no table root listed
