"""An Iceberg table's state as the shared planner reads it (models/state.TableState): one row per live data
file (its path as the manifest names it, size, record count, the time of the snapshot that added it, its
partition rendered per its spec's transforms), Iceberg's own facts (state.IcebergState: snapshot, specs,
delete files, the pyiceberg objects rewrite and replace read) in ``extra``. No JVM: pyiceberg reads the
catalog and the manifests."""

from __future__ import annotations

from dataclasses import replace
from typing import TYPE_CHECKING

from compactor.errors import TableReadError
from compactor.formats.iceberg.catalog import open_location
from compactor.formats.iceberg.state import IcebergState, state_of
from compactor.models.state import TableState, files_table
from compactor.models.table import TableLocation
from compactor.runtime.gc_pause import gc_paused
from compactor.runtime.paths import local_path

if TYPE_CHECKING:
    from pyiceberg.table import Table
    from pyiceberg.table.metadata import TableMetadata

#: the partition column naming a file's partition spec, on a table with more than one spec
SPEC_COLUMN = "spec_id"


def table_root(table: Table) -> str:
    """The table's location as compactor names the table (a ``file:`` location as a local path)."""
    location = table.location().rstrip("/")
    return local_path(location) if location.startswith("file://") else location.removeprefix("file:")


def partition_columns(st: IcebergState) -> tuple[str, ...]:
    """Every partition field name of every spec, in spec order (a spec column first when there are several)."""
    names: list[str] = [SPEC_COLUMN] if len(st.specs) > 1 else []
    for spec in sorted(st.specs, key=lambda s: s.spec_id):
        names += [f.name for f in spec.fields if f.name not in names]
    return tuple(names)


def _added_at(md: TableMetadata) -> dict[int, int]:
    """Data sequence number -> the time (ms) of the snapshot that committed it."""
    return {int(s.sequence_number or 0): int(s.timestamp_ms) for s in md.snapshots}


def as_table_state(st: IcebergState, table: Table) -> TableState:
    columns = partition_columns(st)
    times = _added_at(table.metadata)
    fallback = st.timestamp_ms or 0
    rows = []
    for f in st.files:
        values: dict[str, str | None] = {v.name: v.text for v in f.partition}
        if len(st.specs) > 1:
            values[SPEC_COLUMN] = str(f.spec_id)
        rows.append({"path": f.path, "size_bytes": f.size, "num_records": f.record_count,
                     "modification_time": times.get(f.sequence_number, fallback), "partition": values})
    return TableState(uri=table_root(table), format="iceberg", version=st.snapshot_id, partition_columns=columns,
                      files=files_table(rows, columns), properties=dict(st.properties), extra=st,
                      table_id=str(table.metadata.table_uuid))


def read_iceberg_state(location: TableLocation, snapshot_id: int | None = None) -> tuple[TableState, Table]:
    """The table a reference names, at ``snapshot_id`` (None: its current snapshot), and the pyiceberg table."""
    table, name = open_location(location)
    if snapshot_id is not None and table.metadata.snapshot_by_id(snapshot_id) is None:
        raise TableReadError(f"{location.identifier}: snapshot {snapshot_id} is no longer in the table's metadata "
                             "(expired?)")
    with gc_paused():  # as read_live: many small objects, no cycle, each full collection walks them all
        state = as_table_state(state_of(table, name, snapshot_id), table)
    if location.identifier is None:  # named by path: the plan names it as its policy does
        state = replace(state, uri=location.uri)
    return state, table


def iceberg_state(state: TableState) -> IcebergState:
    """Iceberg's own facts of a state read by this format."""
    if not isinstance(state.extra, IcebergState):
        raise TableReadError(f"{state.uri}: the state was not read as an Iceberg table")
    return state.extra
