"""What the contract suite needs of each format, as a small adapter: how its writer makes a table of small
files and appends one, which data files its metadata lists (live) and may still need (referenced), the
change another writer makes after planning that must make the plan stale, its crash points and the policy
lines it needs. Rows are (id, v) pairs held in the files themselves: read file by file, independently of
compactor's own readers.

A format the suite registers itself (the toy) names its registry entry as ``spec``; a built-in one has none.
"""

from __future__ import annotations

import hashlib
import json
import time
import uuid
from abc import ABC, abstractmethod
from collections import Counter
from collections.abc import Iterable, Sequence
from pathlib import Path
from typing import ClassVar
from urllib.parse import unquote, urlparse

import pyarrow as pa
import pyarrow.parquet as pq

from compactor.models.formats import FormatSpec
from compactor.models.table import TableLocation
from tests.formats.contract import toy_format

Row = tuple[int, int, bytes]


def rows_of(ids: Sequence[int]) -> pa.Table:
    """Rows of about 216 bytes that do not compress (a 200-byte pad drawn from the id): 2,000 rows make a
    file of about 430 KB, so a few rows make files of the sizes a 1 MiB target packs two to a bin."""
    return pa.table({"id": pa.array(ids, pa.int64()), "v": pa.array([i * 7919 % 1_000_003 for i in ids], pa.int64()),
                     "pad": pa.array([hashlib.shake_128(i.to_bytes(8, "little")).digest(200) for i in ids], pa.binary())})


def file_rows(table: Path, rel: str) -> Counter[Row]:
    t = pq.ParquetFile(table / rel).read(columns=["id", "v", "pad"], use_threads=False)
    return Counter(zip(t.column("id").to_pylist(), t.column("v").to_pylist(), t.column("pad").to_pylist()))


class Adapter(ABC):
    #: the format's registered name
    name: ClassVar[str]
    #: the crash points of its rewrite, in the order a run reaches them (its formats/<format>/faults.py)
    crash_points: ClassVar[tuple[str, ...]]
    #: the registry entry the suite registers (None: a built-in format)
    spec: ClassVar[FormatSpec | None] = None
    #: what the policy says beside its name, path and compaction (YAML lines under the table entry)
    policy: ClassVar[str] = ""
    #: a file of the format's own metadata (relative to the table root): no plan may name it
    metadata_file: ClassVar[str]

    def names(self, table: Path) -> str:
        """How the policy names the table (YAML lines under its entry): by its path."""
        return f"    path: {table}\n"

    def profiles(self, table: Path) -> str | None:
        """The project's profiles.yml (None: none, the implicit local target)."""
        return None

    @abstractmethod
    def write(self, table: Path, ids: Sequence[int], group: int) -> None:
        """A writer's commit of one new file holding ``ids`` (``group``: the partition it goes to, for a
        partitioned format; a format without partitions ignores it)."""

    def make(self, table: Path, files: Iterable[tuple[Sequence[int], int]]) -> None:
        """A new table, one commit per file of ``files`` ((ids, group) each)."""
        for ids, group in files:
            self.write(table, ids, group)

    @abstractmethod
    def live(self, table: Path) -> frozenset[str]:
        """The data files the table's metadata lists now (paths relative to the table root)."""

    @abstractmethod
    def referenced(self, table: Path) -> frozenset[str]:
        """Every data file the format may still need (live ones, and those it keeps for older readers or
        deletes later itself): a data file on storage outside this set is an orphan."""

    @abstractmethod
    def conflict(self, table: Path, planned: str) -> None:
        """Another writer's change after planning that makes the planned action reading ``planned`` stale."""

    def rel(self, table: Path, name: str) -> str:
        """A planned or listed path relative to the table root (a manifest may list absolute URIs)."""
        if "://" in name:
            name = unquote(urlparse(name).path)
        if name.startswith("/"):
            return Path(name).relative_to(table).as_posix()
        return name

    def rows(self, table: Path) -> Counter[Row]:
        """Every row the table holds now (the live files' rows, read file by file)."""
        out: Counter[Row] = Counter()
        for rel in self.live(table):
            out += file_rows(table, rel)
        return out


class DeltaAdapter(Adapter):
    name = "delta"
    crash_points = ("delta.journal_written", "delta.outputs_written", "delta.before_commit", "delta.after_commit")
    metadata_file = "_delta_log/00000000000000000000.json"

    def write(self, table: Path, ids: Sequence[int], group: int) -> None:
        from deltalake import write_deltalake

        data = rows_of(ids).append_column("p", pa.array([str(group)] * len(ids), pa.string()))
        write_deltalake(str(table), data, partition_by=["p"], mode="append")

    def live(self, table: Path) -> frozenset[str]:
        from deltalake import DeltaTable

        return frozenset(self.rel(table, u) for u in DeltaTable(str(table)).file_uris())

    def referenced(self, table: Path) -> frozenset[str]:
        """Every file a commit added (a removed file stays referenced by its add until a VACUUM)."""
        added: set[str] = set()
        for f in (table / "_delta_log").glob("*.json"):
            for line in f.read_text().splitlines():
                if line.strip() and "add" in (obj := json.loads(line)):
                    added.add(unquote(obj["add"]["path"]))
        return frozenset(added)

    def conflict(self, table: Path, planned: str) -> None:
        """A DELETE of every row of ``planned``: delta-rs removes the file."""
        from deltalake import DeltaTable

        ids = sorted(row[0] for row in file_rows(table, planned))
        DeltaTable(str(table)).delete(f"id IN ({', '.join(map(str, ids))})")


class SinkAdapter(Adapter):
    """A file-sink output in Spark's layout, written without Spark: one parquet file per batch in
    ``part=<group>/``, a metadata log file per batch; ``make`` ends with a ``.compact`` listing every file
    (only files a ``.compact`` lists are compacted), a later batch is a delta log file."""

    name = "spark_file_sink"
    crash_points = ("sink.journal_written", "sink.before_swap", "sink.after_swap")
    metadata_file = "_spark_metadata/0"
    policy = "    format: spark_file_sink\n    sink: {quiet_period: 0, downstream_streaming_readers: none}\n"

    def _log(self, table: Path) -> Path:
        return table / "_spark_metadata"

    def _batches(self, table: Path) -> list[tuple[int, Path]]:
        found = [(int(p.name.split(".")[0]), p) for p in self._log(table).iterdir()
                 if p.name.split(".")[0].isdigit()] if self._log(table).is_dir() else []
        return sorted(found)

    def _entries(self, log_file: Path) -> list[dict[str, object]]:
        return [json.loads(line) for line in log_file.read_text().splitlines()[1:] if line.strip()]

    def _file(self, table: Path, ids: Sequence[int], group: int, batch: int) -> str:
        f = table / f"part={group}" / f"part-{batch:05d}-{uuid.uuid4()}.c000.snappy.parquet"
        f.parent.mkdir(parents=True, exist_ok=True)
        pq.write_table(rows_of(ids), f)
        return json.dumps({"path": f.as_uri(), "size": f.stat().st_size, "isDir": False,
                           "modificationTime": int(time.time() * 1000), "blockReplication": 1, "blockSize": 1,
                           "action": "add"})

    def write(self, table: Path, ids: Sequence[int], group: int) -> None:
        """One more batch: a delta log file listing its one new file."""
        batches = self._batches(table)
        b = batches[-1][0] + 1 if batches else 0
        self._log(table).mkdir(parents=True, exist_ok=True)
        (self._log(table) / str(b)).write_text("v1\n" + self._file(table, ids, group, b))

    def make(self, table: Path, files: Iterable[tuple[Sequence[int], int]]) -> None:
        """Batches 0..N-1, the last a ``.compact`` listing every file (the writer's compact interval is N)."""
        entries = [self._file(table, ids, group, b) for b, (ids, group) in enumerate(files)]
        self._log(table).mkdir(parents=True, exist_ok=True)
        for b, e in enumerate(entries[:-1]):
            (self._log(table) / str(b)).write_text("v1\n" + e)
        (self._log(table) / f"{len(entries) - 1}.compact").write_text("v1\n" + "\n".join(entries))

    def live(self, table: Path) -> frozenset[str]:
        """The latest ``.compact``'s entries and those of the batches after it."""
        batches = self._batches(table)
        start = max((i for i, (_, p) in enumerate(batches) if p.name.endswith(".compact")), default=0)
        listed: set[str] = set()
        for _, p in batches[start:]:
            for e in self._entries(p):
                if e.get("action") == "delete":
                    listed.discard(self.rel(table, str(e["path"])))
                else:
                    listed.add(self.rel(table, str(e["path"])))
        return frozenset(listed)

    def referenced(self, table: Path) -> frozenset[str]:
        """Files any log file lists, and the replaced files compactor's ledger deletes after the grace period."""
        out = {self.rel(table, str(e["path"])) for _, p in self._batches(table) for e in self._entries(p)}
        ledger = table / "_compactor" / "sink_ledger.json"
        if ledger.exists():
            out |= {self.rel(table, str(e["file"])) for e in json.loads(ledger.read_text())}
        return frozenset(out)

    def conflict(self, table: Path, planned: str) -> None:
        """The streaming query ran again: a new batch (the manifest compactor planned against is not the latest)."""
        self.write(table, [10_000_000 + i for i in range(3)], 0)


class ToyAdapter(Adapter):
    name = toy_format.NAME
    crash_points = tuple(toy_format.CRASH_POINTS)
    spec = toy_format.SPEC
    metadata_file = toy_format.MANIFEST
    policy = f"    format: {toy_format.NAME}\n"

    def write(self, table: Path, ids: Sequence[int], group: int) -> None:
        where = TableLocation(str(table))
        if not (table / toy_format.MANIFEST).exists():
            table.mkdir(parents=True, exist_ok=True)
            toy_format.create(where)
        toy_format.append(where, rows_of(ids))

    def live(self, table: Path) -> frozenset[str]:
        return frozenset(e.path for e in toy_format.read_manifest(TableLocation(str(table)))[0].files)

    def referenced(self, table: Path) -> frozenset[str]:
        return self.live(table)  # a rewrite deletes the files it replaced once its manifest is in place

    def conflict(self, table: Path, planned: str) -> None:
        """Another writer's append: the manifest's version moves on."""
        self.write(table, [10_000_000 + i for i in range(3)], 0)


from tests.formats.contract.iceberg_adapter import IcebergAdapter  # noqa: E402 - it derives from Adapter

ADAPTERS: tuple[Adapter, ...] = (DeltaAdapter(), SinkAdapter(), ToyAdapter(), IcebergAdapter())
