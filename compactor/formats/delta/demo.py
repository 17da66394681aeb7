"""The Delta demo table (``TableFormat.demo``): `events`, a date-partitioned Delta table written in many
small appends (like a streaming job), and its before/after for `compactor demo`."""

from __future__ import annotations

import datetime as dt
import time
from collections.abc import Callable
from pathlib import Path

from compactor.models.demo import DemoSwitch, TableSnapshot


def write_events_table(path: Path, *, days: int = 6, appends_per_day: int = 50, rows: int = 400,
                       today: dt.date | None = None) -> int:
    """A date-partitioned Delta table written in many small appends (like a streaming job)."""
    import random

    import pyarrow as pa
    from deltalake import write_deltalake

    today = today or dt.date.today()
    rng = random.Random(7)
    n = 0
    for _i in range(appends_per_day):
        for d in range(days):
            date = (today - dt.timedelta(days=d)).isoformat()
            ids = list(range(n, n + rows))
            n += rows
            batch = pa.table({
                "date": [date] * rows,
                "event_id": pa.array(ids, pa.int64()),
                "user_id": pa.array([rng.randrange(10_000) for _ in ids], pa.int64()),
                "kind": [rng.choice(["view", "click", "purchase"]) for _ in ids],
                "amount": pa.array([round(rng.random() * 100, 2) for _ in ids], pa.float64()),
                "ts": pa.array([dt.datetime(2024, 1, 1) + dt.timedelta(seconds=j) for j in ids], pa.timestamp("us")),
            })
            write_deltalake(str(path), batch, partition_by=["date"], mode="append")
    return n


def table_snapshot(uri: str) -> TableSnapshot:
    """File count, size histogram and a timed full scan of a Delta table."""
    import pyarrow as pa
    import pyarrow.parquet as pq
    from deltalake import DeltaTable

    dt_ = DeltaTable(uri)
    sizes = pa.table(dt_.get_add_actions(flatten=True)).column("size_bytes").to_pylist()
    t0 = time.perf_counter()
    rows = pq.read_table(dt_.file_uris(), use_threads=False).num_rows
    scan = time.perf_counter() - t0
    return TableSnapshot(files=len(sizes), bytes=sum(sizes), sizes=sizes, rows=rows, scan_s=scan, version=dt_.version())


class DeltaDemo:
    """The demo lake's `events` (and the example project's disabled z-order policy): the DemoTable of
    format "delta"."""

    name = "events"
    policy_files: tuple[str, ...] = ("tables/events.yml", "tables/orders_zorder.yml")
    switch: DemoSwitch | None = None  # always built: it needs nothing beyond compactor's own dependencies

    def unavailable(self) -> str | None:
        return None

    def build(self, path: Path, say: Callable[[str], None]) -> None:
        say(f"writing the `{self.name}` Delta table in 300 small appends ...")
        write_events_table(path)

    def snapshot(self, uri: str) -> TableSnapshot | None:
        return table_snapshot(uri)
