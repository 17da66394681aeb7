"""`compactor demo`: build a small lake full of small files, then validate, plan and apply it."""

from __future__ import annotations

import datetime as dt
import logging
import shutil
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from importlib import resources
from pathlib import Path

from compactor.errors import UsageError

log = logging.getLogger(__name__)
MARKER = ".compactor-demo"


@dataclass
class DemoLake:
    """What ``build_demo`` wrote: the folder (also the project's), the tables by name, and notes."""

    root: Path
    project_dir: Path
    tables: dict[str, str] = field(default_factory=dict)
    notes: list[str] = field(default_factory=list)


def prepare_dir(directory: Path) -> None:
    if directory.exists() and any(directory.iterdir()):
        if not (directory / MARKER).exists():
            raise UsageError(f"{directory} exists and was not created by `compactor demo`",
                             hint="pass an empty or new directory")
        shutil.rmtree(directory)
    directory.mkdir(parents=True, exist_ok=True)
    (directory / MARKER).write_text("created by compactor demo; safe to delete\n")


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


def write_project(project_dir: Path, lake: Path, *, with_sink: bool = True) -> None:
    """The example project for the demo lake; the sink policy only when the sink was written (without
    Java there is none, and a policy for a missing table would fail every plan of the project)."""
    src = resources.files("compactor").joinpath("example_project")
    files = ("compactor.yml", "profiles.yml", "tables/events.yml", "tables/orders_zorder.yml") \
        + (("tables/clicks_sink.yml",) if with_sink else ())
    for rel in files:
        text = src.joinpath(rel).read_text(encoding="utf-8")
        if rel == "compactor.yml":
            text = text.replace("lake_root: ./compactor-demo/lake", f"lake_root: {lake.as_posix()}")
        dst = project_dir / rel
        dst.parent.mkdir(parents=True, exist_ok=True)
        dst.write_text(text, encoding="utf-8")


def build_demo(directory: Path, *, with_sink: bool = True, say: Callable[[str], None] = lambda s: None) -> DemoLake:
    directory = Path(directory)
    prepare_dir(directory)
    lake = directory / "lake"
    demo = DemoLake(root=directory, project_dir=directory)
    say("writing the `events` Delta table in 300 small appends ...")
    write_events_table(lake / "events")
    demo.tables["events"] = str(lake / "events")
    if with_sink:
        # the sink part needs a JVM and pyspark (the [spark] extra); without them the demo goes on
        import importlib.util

        if importlib.util.find_spec("pyspark") is None or shutil.which("java") is None:
            demo.notes.append("file-sink demo skipped: it needs Java and pyspark (pip install 'compactor[spark]')")
        else:
            from compactor.tasks.demo_sink import build_demo_sink

            say("running a Structured Streaming query into `clicks_sink` ...")
            build_demo_sink(lake / "clicks_sink")
            demo.tables["clicks_sink"] = str(lake / "clicks_sink")
    write_project(directory, lake.resolve(), with_sink="clicks_sink" in demo.tables)
    return demo


@dataclass(frozen=True)
class TableSnapshot:
    """A Delta table before or after the demo's compaction."""

    files: int
    bytes: int
    sizes: list[int]
    rows: int
    scan_s: float
    version: int


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
