"""The spark engine's exact-bin rewrite of Iceberg tables, through Iceberg's own Spark rewrite machinery: the
one module pinned to the internals of Iceberg's Spark runtime (``PINNED``; another version is refused).

Per bin, the planned data files' scan tasks at the planned snapshot (each with the delete files that apply
to it: position deletes, deletion vectors, equality deletes) are staged as one file group
(``ScanTaskSetManager``) and read by Iceberg's reader with their deletes applied as one split; the bins of
one Spark job (``rewrite_bins``) are one Spark partition each, written by Iceberg's writer as one file per
bin in the bins' partition spec (``FileRewriteCoordinator`` hands back the new ``DataFile`` objects, named
after the Spark partition that wrote them); this is what ``rewrite_data_files`` does for its file groups,
with compactor choosing the files. The writer writes into a folder of this commit group alone: a
transaction (never committed) sets the table's ``write.data.path`` for the writer only, so the crash
journal names the folder before any file exists (``owned``: runtime/journal.py). Nothing is committed
until every bin is verified; then one ``RewriteFiles`` replaces exactly the planned data files, their
deletion vectors and the position delete files only they referenced, by the new files, as one ``replace``
snapshot validated from the planned snapshot (Iceberg's own conflict checks: the files are still live, no
delete was added for them since), with the planned snapshot's data sequence number (as Iceberg's rewrite
does, so an equality delete committed meanwhile still applies to the rows).

Verification before the commit, per bin: rows written (the output's manifest entry, and its footer) equal
rows read after deletes (counted as they stream into the writer), which equal per input the rows its
footer holds less the rows its deletes remove (counted in one Spark job per commit group over the files
that have deletes); column by column the output's footer holds what the inputs' footers say (Parquet
inputs and output: engines/footer_check.column_problem, as the local rewrite checks)."""

from __future__ import annotations

import logging
import threading
import time
import uuid
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from compactor.errors import ApplyError, StalePlanError, UnsupportedTableError, VerificationError
from compactor.formats.iceberg.spark import committed_snapshot, iceberg_version, java_commit_failure, use_session_loader

if TYPE_CHECKING:
    from compactor.formats.iceberg.state import IcebergState

log = logging.getLogger(__name__)

#: the Iceberg runtime whose rewrite internals this module is written against and tested with
PINNED = "1.12.0"


#: a py4j proxy of Iceberg's Java ``FileScanTask`` (a data file with the delete files that apply to it)
ScanTask = Any


class IcebergRuntimeVersionError(UnsupportedTableError):
    code = "iceberg_runtime_version"


@dataclass(frozen=True)
class SparkBin:
    """One bin rewritten by Spark and verified, not committed."""

    inputs: tuple[str, ...]
    #: Iceberg's Java DataFile of the output (None: every row of the bin was deleted)
    output: Any
    output_path: str | None
    output_size: int
    rows_in: int
    rows_deleted: int
    rows_out: int
    seconds: float


def check_runtime(spark: Any) -> None:
    """Refuse (IcebergRuntimeVersionError) a session without Iceberg's runtime, or with another version."""
    try:
        version = iceberg_version(spark)
    except Exception:  # noqa: BLE001 - py4j: the class is not in the session's JVM
        raise IcebergRuntimeVersionError(
            "the Spark session has no Apache Iceberg runtime (its jars could not be loaded when the session "
            "started: see the warning then)",
            hint=f"check Maven Central access for org.apache.iceberg:iceberg-spark-runtime-<spark>_2.13:{PINNED}, "
                 "or apply Iceberg tables with the local engine") from None
    if version.split(" ")[0] != PINNED and PINNED not in version:
        raise IcebergRuntimeVersionError(
            f"the session's Iceberg runtime is {version}: compactor's exact-bin rewrite is written against the "
            f"internals of Iceberg {PINNED}'s Spark runtime and refuses another version",
            hint=f"load org.apache.iceberg:iceberg-spark-runtime-<spark>_2.13:{PINNED}")


def _name(path: str) -> str:
    """``path`` as storage names it (``file:/x`` and ``file:///x`` alike)."""
    from compactor.runtime.storage import locate

    return locate(path)[1]


class JavaLists:
    """Java iterables as Python lists, through one looked-up class: py4j resolves a dotted class name one
    round trip per part, which made each conversion cost ~10 round trips (40 s for 1,000 files' deletes)."""

    def __init__(self, jvm: Any) -> None:
        self._new = jvm.org.apache.iceberg.relocated.com.google.common.collect.Lists.newArrayList

    def __call__(self, iterable: Any) -> list[Any]:
        return list(self._new(iterable))


class SparkRewrite:
    """The rewrite of one action's bins of ``jtable`` (Java) planned at ``planned`` (pyiceberg's view),
    writing into ``folder`` (a URI of a folder no other writer uses)."""

    def __init__(self, spark: Any, jtable: Any, planned: IcebergState, folder: str) -> None:
        self.spark, self.jvm = spark, spark._jvm
        self.jtable, self.planned, self.folder = jtable, planned, folder
        self._list = JavaLists(self.jvm)
        snapshot_id = planned.snapshot_id
        if snapshot_id is None:
            raise StalePlanError(f"{planned.identifier}: the plan was made on a table without snapshots")
        self.jtable.refresh()
        if self.jtable.snapshot(snapshot_id) is None:
            raise StalePlanError(f"{planned.identifier}: the planned snapshot {snapshot_id} is no longer in the "
                                 "table's metadata (expired?); nothing was committed", hint="plan again")
        txn = jtable.newTransaction()
        txn.updateProperties().set("write.data.path", folder).set("write.object-storage.path", folder).commit()
        self.writer_table = txn.table()  # never committed: the writer's view, with the folder as data path
        self._tasks: dict[str, ScanTask] | None = None
        self._tasks_lock = threading.Lock()  # the group's jobs run in threads: one planFiles for all

    def tasks(self, paths: Sequence[str]) -> list[Any]:
        """The scan tasks (whole files, with their deletes) of ``paths`` at the planned snapshot."""
        with self._tasks_lock:
            if self._tasks is None:
                scan = self.jtable.newScan().useSnapshot(self.planned.snapshot_id)
                self._tasks = {str(t.file().location()): t for t in self._list(scan.planFiles())}
        missing = [p for p in paths if p not in self._tasks]
        if missing:
            raise StalePlanError(f"{self.planned.identifier}: {len(missing)} planned file(s) are not live at the "
                                 f"planned snapshot {self.planned.snapshot_id}, e.g. {missing[0]}; nothing was committed",
                                 hint="plan again")
        return [self._tasks[p] for p in paths]

    def _singleton(self, name: str) -> Any:
        """``org.apache.iceberg.spark.<name>.get()``, called through Java reflection on the class the
        session's loader loads: py4j's own lookup of these static methods failed at random in worker
        threads (``SparkTableCache.get does not exist in the JVM``) while the class loaded."""
        jvm = self.jvm
        loader = self.spark._jsparkSession.sharedState().jarClassLoader()
        cls = jvm.java.lang.Class.forName(f"org.apache.iceberg.spark.{name}", True, loader)
        gateway = self.spark.sparkContext._gateway
        method = cls.getMethod("get", gateway.new_array(jvm.java.lang.Class, 0))
        return method.invoke(None, gateway.new_array(jvm.java.lang.Object, 0))

    def _stage(self, group: str, tasks: Sequence[Any]) -> None:
        use_session_loader(self.spark)
        jtasks = self.jvm.java.util.ArrayList()
        for t in tasks:
            jtasks.add(t)
        self._singleton("SparkTableCache").add(group, self.writer_table)
        self._singleton("ScanTaskSetManager").stageTasks(self.writer_table, group, jtasks)

    def _unstage(self, group: str) -> None:
        self._singleton("SparkTableCache").remove(group)
        self._singleton("ScanTaskSetManager").removeTasks(self.writer_table, group)

    def _read(self, group: str, size: int) -> Any:
        return (self.spark.read.format("iceberg").option("split-size", str(2 * size + (1 << 20)))
                .option("file-open-cost", "0").load(group))

    def rows_after_deletes(self, paths: Sequence[str]) -> dict[str, int]:
        """Rows of each of ``paths`` that Iceberg's reader returns with its deletes applied, counted in one
        Spark job (those without delete files: their record counts, no job)."""
        by_path = {f.path: f for f in self.planned.files}
        out = {p: by_path[p].record_count for p in paths if not by_path[p].deletes}
        deleted = [p for p in paths if by_path[p].deletes]
        if not deleted:
            return out
        from pyspark.sql import functions as F

        group = f"compactor-count-{uuid.uuid4().hex}"
        self._stage(group, self.tasks(deleted))
        try:
            frame = self._read(group, sum(by_path[p].size for p in deleted))
            rows = frame.groupBy(F.input_file_name()).count().collect()
        finally:
            self._unstage(group)
        counted = {str(r[0]): int(r[1]) for r in rows}
        out.update({p: counted.get(p, 0) for p in deleted})
        return out

    def rewrite_bins(self, bins: Sequence[Sequence[str]], rows_read: Mapping[str, int],
                     verify: Callable[[Sequence[str], Sequence[int], str], None]) -> list[SparkBin]:
        """Rewrite each bin of ``bins`` (files of one partition spec) into one file, in one Spark job: each
        bin's staged files are read as one split, the splits in bin order are one Spark partition each, and
        Iceberg's writer names every file after the Spark partition that wrote it (``<partition>-<task>-...``),
        which maps outputs to bins. ``verify(paths, rows read per input, output path)`` checks an output's
        footer against its inputs' (raises VerificationError)."""
        from functools import reduce

        from pyspark.sql import Observation
        from pyspark.sql import functions as F

        start = time.perf_counter()
        by_path = {f.path: f for f in self.planned.files}
        specs = {by_path[p].spec_id for b in bins for p in b}
        if len(specs) != 1 or any(len({by_path[p].partition_key for p in b}) != 1 for b in bins):
            raise ApplyError(f"{self.planned.identifier}: a bin's files are in more than one partition, or one job's "
                             "bins in more than one spec; nothing was committed")
        token = uuid.uuid4().hex
        groups = [f"compactor-{token}-{i}" for i in range(len(bins))]
        written_to = f"compactor-{token}-out"
        seen = [Observation(f"rows-{g}") for g in groups]
        staged: list[str] = []
        try:
            frames = []
            for g, paths, obs in zip(groups, bins, seen):
                self._stage(g, self.tasks(paths))
                staged.append(g)
                frames.append(self._read(g, sum(by_path[p].size for p in paths))
                              .observe(obs, F.count(F.lit(1)).alias("rows")))
            self._stage(written_to, self.tasks([p for b in bins for p in b]))
            staged.append(written_to)
            frame = reduce(lambda x, y: x.union(y), frames)
            (frame.write.format("iceberg").option("target-file-size-bytes", str(1 << 62))
             .option("distribution-mode", "none").option("output-spec-id", str(specs.pop()))
             .mode("append").save(written_to))
            new = self._list(self._singleton("FileRewriteCoordinator").fetchNewFiles(self.writer_table, written_to))
        finally:
            for g in staged:
                self._unstage(g)
            self._singleton("FileRewriteCoordinator").clearRewrite(self.writer_table, written_to)
        inside = _name(self.folder).rstrip("/") + "/"
        outputs: dict[int, list[tuple[str, Any]]] = {}
        for f in new:
            path = str(f.location())
            if not _name(path).startswith(inside):
                raise ApplyError(f"{self.planned.identifier}: Spark wrote {path} outside this commit group's folder "
                                 f"{self.folder} (a table location provider compactor cannot steer); nothing was "
                                 "committed")
            outputs.setdefault(int(path.rsplit("/", 1)[-1].split("-", 1)[0]), []).append((path, f))
        unknown = sorted(set(outputs) - set(range(len(bins))))
        if unknown:
            raise ApplyError(f"{self.planned.identifier}: Spark wrote files for {len(unknown)} partition(s) of no bin "
                             f"(e.g. {outputs[unknown[0]][0][0]}); nothing was committed")
        seconds = (time.perf_counter() - start) / max(1, len(bins))
        return [self._verified(paths, outputs.get(i, []), int((obs.get or {}).get("rows", -1)), rows_read, verify,
                               seconds) for i, (paths, obs) in enumerate(zip(bins, seen))]

    def _verified(self, paths: Sequence[str], outputs: list[tuple[str, Any]], streamed: int,
                  rows_read: Mapping[str, int], verify: Callable[[Sequence[str], Sequence[int], str], None],
                  seconds: float) -> SparkBin:
        """The bin of ``paths`` with the files Spark wrote for it, checked (module docstring)."""
        by_path = {f.path: f for f in self.planned.files}
        files = [by_path[p] for p in paths]
        rows_in = sum(f.record_count for f in files)
        expected = sum(rows_read[p] for p in paths)
        where = f"{self.planned.identifier}: the rewrite of {len(paths)} file(s)"
        if streamed != expected:
            raise VerificationError(f"{where}: {streamed} rows reached the writer, but the inputs hold {expected} "
                                    "after deletes; nothing was committed")
        if not outputs:
            if expected:
                raise VerificationError(f"{where} wrote no file for {expected} rows; nothing was committed")
            return SparkBin(tuple(paths), None, None, 0, rows_in, rows_in, 0, seconds)
        if len(outputs) != 1:
            raise VerificationError(f"{where} wrote {len(outputs)} files, not one; nothing was committed")
        path, output = outputs[0]
        written = int(output.recordCount())
        if written != expected:
            raise VerificationError(f"{where}: the output's manifest entry holds {written} rows, the inputs "
                                    f"{expected} after deletes; nothing was committed")
        if int(output.specId()) != files[0].spec_id:  # its values: the footer check below bounds them by the inputs'
            raise VerificationError(f"{where}: the output {path} is not in the bin's partition spec; nothing was "
                                    "committed")
        if str(output.format()) == "PARQUET" and all(f.file_format == "PARQUET" for f in files):
            verify(paths, [rows_read[p] for p in paths], path)
        return SparkBin(tuple(paths), output, path, int(output.fileSizeInBytes()), rows_in, rows_in - expected,
                        written, seconds)

    def commit(self, bins: Sequence[SparkBin], stranded: Sequence[str], properties: Mapping[str, str]) -> int:
        """Commit ``bins`` as one ``replace`` snapshot (module docstring), removing the deletion vectors of
        the replaced files and the position delete files ``stranded`` names; the new snapshot's id. Raises
        StalePlanError when Iceberg's validation refuses (nothing committed), CommitOutcomeUnknown when the
        catalog did not say whether it landed."""
        from compactor.formats.iceberg.replace import CommitOutcomeUnknown

        planned_id = self.planned.snapshot_id
        assert planned_id is not None
        removed = [p for b in bins for p in b.inputs]
        tasks = self.tasks(removed)
        by_path = {f.path: f for f in self.planned.files}
        with_deletes = [self._list(t.deletes()) for p, t in zip(removed, tasks) if by_path[p].deletes]
        deletes = {str(d.location()): d for found in with_deletes for d in found}
        rewrite = self.jtable.newRewrite().validateFromSnapshot(planned_id)
        rewrite = rewrite.dataSequenceNumber(self.jtable.snapshot(planned_id).sequenceNumber())
        for t in tasks:
            rewrite = rewrite.deleteFile(t.file())
        vectors = [d for found in with_deletes for d in found if str(d.format()) == "PUFFIN"
                   and d.referencedDataFile() is not None]
        for d in vectors:  # a deletion vector of a replaced file: it deletes rows of that file alone
            rewrite = rewrite.deleteFile(d)
        for path in stranded:
            rewrite = rewrite.deleteFile(deletes[path])
        for b in bins:
            if b.output is not None:
                rewrite = rewrite.addFile(b.output)
        for k, v in properties.items():
            rewrite = rewrite.set(k, v)
        where = self.planned.identifier
        try:
            rewrite.commit()
        except Exception as e:  # noqa: BLE001 - py4j wraps the JVM's exception; its class name says which
            failure = java_commit_failure(e)
            if failure.unknown:
                raise CommitOutcomeUnknown(f"{where}: the catalog did not say whether the replace commit landed: "
                                           f"{failure.first}; its outputs are kept until the table's history shows") from None
            if failure.stale:
                raise StalePlanError(f"{where}: not committed, the plan is stale: {failure.first}",
                                     hint="plan again") from None
            raise ApplyError(f"{where}: the replace commit failed: {failure.first}; nothing was committed") from None
        snapshot = committed_snapshot(self.jtable, properties, "replace")
        if snapshot is None:
            raise ApplyError(f"{where}: the replace snapshot is not in the table's history after its commit")
        return int(snapshot.snapshotId())

