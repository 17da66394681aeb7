"""Delta tables on any store root (local path, s3://, az://) and exact row checks, for the object-store tests."""

from __future__ import annotations

import datetime as dt
import json
from collections import Counter
from collections.abc import Mapping
from urllib.parse import unquote

import pyarrow as pa
import pyarrow.parquet as pq
from deltalake import DeltaTable, write_deltalake

from compactor.formats.delta.read.state import read_delta_state
from compactor.models.table import TableLocation
from compactor.planning.plan import Plan
from compactor.policy.model import Compaction, TablePolicy, Triggers
from compactor.project.model import Target
from compactor.runtime.storage import Storage
from compactor.tasks.plan import build_plan


def _so(storage_options: Mapping[str, str] | None) -> dict[str, str] | None:
    return dict(storage_options) if storage_options else None


def make_table(uri: str, storage_options: Mapping[str, str] | None = None, *, partitions: int = 2, appends: int = 4,
               rows: int = 20, start: int = 0) -> int:
    """A date-partitioned table of small files (one commit per partition per append); ids are unique.
    Returns the next id."""
    n = start
    for _ in range(appends):
        for p in range(partitions):
            ids_ = list(range(n, n + rows))
            n += rows
            write_deltalake(uri, pa.table({"date": [f"2024-01-{p + 1:02d}"] * rows, "id": pa.array(ids_, pa.int64())}),
                            partition_by=["date"], mode="append", storage_options=_so(storage_options))
    return n


def ids(uri: str, storage_options: Mapping[str, str] | None = None) -> Counter:
    """Every live row's id, read file by file through compactor's storage layer."""
    st = Storage(uri, storage_options)
    fs, root = st.pyarrow_fs()
    paths = pa.table(DeltaTable(uri, storage_options=_so(storage_options)).get_add_actions(flatten=True)) \
        .column("path").to_pylist()
    return Counter(i for p in paths for i in pq.ParquetFile(f"{root}/{unquote(p)}", filesystem=fs)
                   .read(columns=["id"], use_threads=False).column("id").to_pylist())


def exactly_once(uri: str, storage_options: Mapping[str, str] | None, expected: int) -> None:
    c = ids(uri, storage_options)
    dup = [k for k, v in c.items() if v > 1]
    assert not dup, f"{len(dup)} duplicated rows, e.g. {dup[:5]}"
    assert sorted(c) == list(range(expected)), f"{len(c)} distinct rows, expected {expected}"


def unreferenced(uri: str, storage_options: Mapping[str, str] | None = None) -> set[str]:
    """Data files on storage that no commit ever added (removed files stay referenced until VACUUM)."""
    st = Storage(uri, storage_options)
    added: set[str] = set()
    for o in st.list("_delta_log"):
        if o.path.endswith(".json"):
            for line in st.read_bytes(o.path).decode().splitlines():
                if line.strip() and "add" in (obj := json.loads(line)):
                    added.add(unquote(obj["add"]["path"]))
    on_store = {o.path for o in st.list() if o.path.endswith(".parquet") and not o.path.startswith("_")}
    return on_store - added


def journals(uri: str, storage_options: Mapping[str, str] | None = None) -> list[str]:
    return [o.path for o in Storage(uri, storage_options).list("_compactor/journal")]


def plan_for(uri: str, storage_options: Mapping[str, str] | None = None, *, engine: str = "local",
             target_size: int = 2**20, min_input_files: int = 2) -> Plan:
    state = read_delta_state(TableLocation(uri, storage_options))
    policy = TablePolicy(name="t", path=uri, compaction=Compaction(
        target_file_size=target_size, min_file_size=target_size // 2, triggers=Triggers(min_input_files=min_input_files)))
    return build_plan([policy], {"t": state}, now=dt.datetime.now(dt.UTC),
                      target=target(storage_options, engine), project_name="tests")


def target(storage_options: Mapping[str, str] | None = None, engine: str = "local") -> Target:
    return Target(engine=engine, storage_options=dict(storage_options or {}))  # type: ignore[arg-type]
