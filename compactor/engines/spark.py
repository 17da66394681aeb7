"""The spark engine: Spark jobs rewrite the planned bins; a table format runs its own SQL through it (``sql``,
with session settings for a block, ``session_conf``, and rows as a temporary view, ``temp_view``) once the
session has what the format needs (``provides``: engines/spark_needs.py). Compute only: the format commits.

Rewrite: Spark reads exactly the bins' files (never a directory listing) with the table's data schema.
The bins of a call (a commit group) are written by ONE Spark job into the first bin's `_`-prefixed
staging folder, partitioned by the bin's index, so bin i's file is the one under ``__compactor_bin=i``
whatever task wrote it; each is moved to its final, unique name and verified against its inputs. The job
reads all the group's files in one scan, tags each row with its file's bin (by file name, Spark's
``_metadata.file_name``, looked up in a map of the group's names: ``bin_map``) and hash-partitions the
rows by bin: a task per bin, up to two per task slot of the session (a task then writes several bins'
files). The rows inputs drop (BinInput.drop) are left out of the same scan by their file name and
``_metadata.row_index`` (engines/spark_drops.py). The inputs' footers are read while Spark writes. Where a
file name repeats within the group, or the table has a column named ``_metadata``, the bins are instead
the partitions of a union of one read per bin (Spark 4 merges a union of single-partition children into
one partition, ``spark.sql.unionOutputPartitioning``, so that write turns it off). One scan instead of a
union of 100 reads took a 100-bin group from 9-11 s to about 6.5 s on local[2] (docs/benchmarks.md).
Adaptive execution is off for the write (it would run the shuffle as a job of its own). A bin with sorted
output (strategy sort), a bin Spark wrote no file for (no rows), and every bin under
``max_concurrent_rewrites: 1`` (the sequential profile) are written one job per bin.
Over Spark Connect (profile ``spark.remote``, engines/spark_connect.py) the same jobs run on the server:
no JVM starts here, and compactor still reads each output back from storage, verifies it and commits it.
pyspark is imported lazily.
"""

from __future__ import annotations

import contextlib
import logging
import posixpath
import threading
import uuid
from collections.abc import Callable, Iterator, Mapping, Sequence
from typing import Any

import pyarrow as pa
import pyarrow.fs as pafs
import pyarrow.parquet as pq

from compactor.engines.base import BinJob, WrittenFile, reporting
from compactor.engines.footer_check import column_problem, dropped, input_footers, rename_problem
from compactor.engines.footer_facts import check_written, footer_facts
from compactor.engines.spark_drops import ROW_FILE, less_drops, positioned
from compactor.engines.spark_needs import NeedsSource, SparkNeeds, no_needs
from compactor.engines.spark_schema import FIELD_ID_CONF, check_field_ids, field_ids, with_field_ids
from compactor.engines.spark_sql import bin_map, file_name, java_error
from compactor.errors import ApplyError, CompactorError, EngineUnavailableError, VerificationError
from compactor.project.model import SparkSettings, Target
from compactor.runtime.paths import filesystem, hadoop_uri, is_remote

log = logging.getLogger(__name__)

#: the column a group's rows are partitioned by on write (its value: the bin's index; never in a data file)
BIN_COLUMN = "__compactor_bin"
#: Spark 4: a union of single-partition children is one partition (true, the default); the union write
#: needs a partition per bin
UNION_PARTITIONING = "spark.sql.unionOutputPartitioning"
#: the session settings of a group's write, restored after it: a partition per bin in a union, no
#: adaptive execution (one job: adaptive execution runs a shuffle as a job of its own)
GROUP_WRITE_CONF = {UNION_PARTITIONING: "false", "spark.sql.adaptive.enabled": "false", **FIELD_ID_CONF}
#: and for local files: the driver looks up every input of the one scan itself, as it did for the union's
#: per-bin reads (above 32 paths Spark would list them in a job of its own; on object stores that job is
#: kept: one request per file from the driver alone would take longer than the job)
LOCAL_LISTING_CONF = {"spark.sql.sources.parallelPartitionDiscovery.threshold": str(2**31 - 1)}
#: the write's own option: each task's file is moved into the staging folder when the task commits (the
#: job's commit then moves nothing); the staging folder is compactor's own, read back file by file
WRITE_OPTIONS = {"mapreduce.fileoutputcommitter.algorithm.version": "2"}
#: the most files a group's one scan tags by name: Spark looks a name up in the map (bin_map) by comparing it
#: with each key in turn, for every row, so a group of more files is written as the union of one read per
#: bin (at 1,000 names, 100 bins of 250,000 rows on local[2]: 5.5-7.7 s with the map against 4.9-6.0 s
#: with a join, which needs a job of its own; measured in docs/benchmarks.md)
MAP_NAMES_MAX = 2048
#: a group's write runs at most this many tasks per task slot: a task per bin costs a task's start, shuffle
#: read and commit per bin (100 bins of 10 small files on local[2]: 3.6-4.6 s with a task per bin,
#: 2.5-2.9 s with 4 tasks, measured in docs/benchmarks.md), and two per slot keep every slot busy
TASKS_PER_SLOT = 2
_GROUP_WRITE_LOCK = threading.Lock()


def _part_files(fs: pafs.FileSystem, folder: str) -> list[str]:
    """The ``part-*.parquet`` files Spark wrote directly in ``folder`` (none when it does not exist)."""
    return [i.path for i in fs.get_file_info(pafs.FileSelector(folder, allow_not_found=True))
            if i.type == pafs.FileType.File and posixpath.basename(i.path).startswith("part-")
            and i.path.endswith(".parquet")]


class SparkEngine:
    name = "spark"

    def __init__(self, target: Target, needs: NeedsSource = no_needs) -> None:
        """``needs``: what the run's table formats need of a session this engine starts."""
        self.target = target
        self.needs = needs
        self.storage_options = dict(target.storage_options)
        self._spark: Any = None
        self._owns_session = False
        self._s3_native: bool | None = None
        self._provided: dict[SparkNeeds, bool] = {}
        self._unavailable: EngineUnavailableError | None = None

    @property
    def spark(self) -> Any:
        if self._spark is None:
            from compactor.engines.spark_session import open_session

            if self._unavailable is not None:  # asked once: an unreachable server is not probed again
                raise self._unavailable
            try:
                self._spark, self._owns_session = open_session(
                    self.target.spark, needs=self.needs, purpose=f"the spark engine of target '{self.target.name}'")
            except CompactorError as e:  # no session, no Spark work: the run stops here (one message)
                self._unavailable = EngineUnavailableError(e.message, hint=e.hint)
                raise self._unavailable from None
        return self._spark

    @property
    def connected(self) -> bool:
        """Whether the session is a Spark Connect one (the Spark work runs on a server; no JVM here)."""
        from compactor.engines.spark_connect import is_connect

        return is_connect(self.spark)

    def is_spark_connect(self) -> bool:
        """``connected``, asked as a method (a table format's view of the engine asks it so)."""
        return self.connected

    @property
    def settings(self) -> SparkSettings:
        """The profile's Spark settings this engine's session follows."""
        return self.target.spark

    def versions(self) -> dict[str, str]:
        import pyspark

        return {"pyspark": pyspark.__version__, "pyarrow": pa.__version__}

    def close(self) -> None:
        """Stop the session this engine created (over Spark Connect: this client's session on the server;
        the server keeps running)."""
        if self._spark is not None and self._owns_session:
            self._spark.stop()
        self._spark = None

    # ----------------------------------------------------------------- a format's own SQL

    def provides(self, needs: SparkNeeds) -> bool:
        """Whether the session runs the SQL of the format that declared ``needs`` (its jars loaded, its SQL
        extension configured); asked once per engine."""
        from compactor.engines.spark_session import session_provides

        if needs not in self._provided:
            self._provided[needs] = session_provides(self.spark, needs)
        return self._provided[needs]

    def sql(self, statement: str, conf: Mapping[str, str] | None = None) -> list[Any]:
        """Run one statement (with session settings applied first) and collect its rows. A failure in
        the JVM is an ApplyError naming the statement and the Java error, not a page of Java stack."""
        for k, v in (conf or {}).items():
            self.spark.conf.set(k, v)
        try:
            rows: list[Any] = self.spark.sql(statement).collect()  # pyspark Rows
            return rows
        except Exception as e:
            if not type(e).__module__.startswith(("py4j", "pyspark")):
                raise
            raise ApplyError(f"{statement}: {java_error(e)}") from e

    def setting(self, key: str) -> str | None:
        """The session's value of ``key`` (None: unset)."""
        value = self.spark.conf.get(key, None)
        return None if value is None else str(value)

    def local_master(self) -> bool:
        """Whether the session runs on this machine (a ``local`` master); False over Spark Connect and where
        there is no SparkContext (a shared Databricks cluster)."""
        if self.connected:
            return False
        try:
            return str(self.spark.sparkContext.master).startswith("local")
        except Exception:  # noqa: BLE001 - no SparkContext here
            return False

    @contextlib.contextmanager
    def temp_view(self, rows: Sequence[tuple[Any, ...]], schema: str) -> Iterator[str]:
        """``rows`` as a temporary view of ``schema`` (a DDL string) for the duration; yields its name."""
        view = f"compactor_rows_{uuid.uuid4().hex}"
        self.spark.createDataFrame(list(rows), schema).createOrReplaceTempView(view)
        try:
            yield view
        finally:
            self.spark.catalog.dropTempView(view)

    @contextlib.contextmanager
    def session_conf(self, conf: Mapping[str, str]) -> Iterator[None]:
        """The session settings ``conf`` for the duration (each restored after, or unset)."""
        before = {k: self.spark.conf.get(k, None) for k in conf}
        for k, v in conf.items():
            self.spark.conf.set(k, v)
        try:
            yield
        finally:
            for k, v in before.items():
                if v is None:
                    self.spark.conf.unset(k)
                else:
                    self.spark.conf.set(k, v)

    # ----------------------------------------------------------------- the rewrite path

    def rewrite(self, jobs: Sequence[BinJob], schema: pa.Schema,
                on_done: Callable[[BinJob, WrittenFile], None] | None = None) -> list[WrittenFile]:
        from pyspark.sql.pandas.types import from_arrow_schema

        # naive Arrow timestamps (timestamp_ntz) as TimestampNTZType: pyspark 4.1's default makes them UTC-adjusted
        spark_schema = with_field_ids(schema, from_arrow_schema(schema, prefer_timestamp_ntz=True))
        one = reporting(lambda j: self._rewrite_bin(j, schema, spark_schema), on_done)
        together = [j for j in jobs if not j.sort_by]
        if len(together) <= 1 or self.target.threads == 1:  # the sequential profile: a job per bin
            with self._field_id_conf(schema):
                return [one(j) for j in jobs]
        done = self._rewrite_in_one_job(together, schema, spark_schema, on_done)
        with self._field_id_conf(schema):
            return [done[j.output] if j.output in done else one(j) for j in jobs]

    def _field_id_conf(self, schema: pa.Schema) -> contextlib.AbstractContextManager[None]:
        """FIELD_ID_CONF for the duration where ``schema`` carries Parquet field ids (nothing otherwise)."""
        return self.session_conf(FIELD_ID_CONF) if field_ids(schema) else contextlib.nullcontext()

    def _rewrite_in_one_job(self, jobs: Sequence[BinJob], schema: pa.Schema, spark_schema: Any,
                            on_done: Callable[[BinJob, WrittenFile], None] | None) -> dict[str, WrittenFile]:
        """The group's bins written by one Spark job; by output location, every bin Spark wrote a file for
        (a bin of no rows gets none: its caller writes it on its own)."""
        from concurrent.futures import ThreadPoolExecutor

        stage = jobs[0].staging
        conf = dict(GROUP_WRITE_CONF)
        if not any(is_remote(i) for job in jobs for i in job.locations):
            conf.update(LOCAL_LISTING_CONF)
        # the inputs' footers are read while Spark writes (about 0.3 s per 1,000 local files, before the job
        # until this was measured); a renamed column they reveal still fails the group before anything is
        # committed, and what Spark wrote is deleted
        with ThreadPoolExecutor(max_workers=1, thread_name_prefix="group-footers") as pool:
            reading = pool.submit(lambda: [self._input_footers(job, schema) for job in jobs])
            self._write_group(jobs, spark_schema, stage, conf)
            fs, staging = filesystem(stage, self.storage_options)
            try:
                footers = reading.result()
            except BaseException:
                with contextlib.suppress(OSError):
                    fs.delete_dir(staging)
                raise
        expected = {f"{BIN_COLUMN}={i}" for i in range(len(jobs))}
        strays = [i.path for i in fs.get_file_info(pafs.FileSelector(staging, allow_not_found=True))
                  if i.type == pafs.FileType.Directory and posixpath.basename(i.path) not in expected]
        if strays:  # rows tagged with no bin of the group: never committed
            raise ApplyError(f"Spark wrote rows of no bin of this group ({', '.join(strays)}); nothing was committed")
        out: dict[str, WrittenFile] = {}
        for i, job in enumerate(jobs):
            folder = posixpath.join(staging, f"{BIN_COLUMN}={i}")
            files = _part_files(fs, folder)
            if len(files) > 1:
                raise ApplyError(f"expected one output file for bin {i} from Spark in {folder}, found {len(files)}")
            if files:
                out[job.output] = self._finish(job, files[0], footers[i], schema)
                if on_done is not None:
                    on_done(job, out[job.output])
        fs.delete_dir(staging)
        return out

    def _write_group(self, jobs: Sequence[BinJob], spark_schema: Any, stage: str, conf: Mapping[str, str]) -> None:
        """The group's one Spark job, with the session settings ``conf`` for its duration."""
        # the settings are the session's: one group write at a time changes them
        with _GROUP_WRITE_LOCK, self.session_conf(conf):
            frame = self._group_frame(jobs, spark_schema)
            # mode "error" (fail if the folder exists): Spark Connect's client knows no "errorifexists"
            frame.write.options(**WRITE_OPTIONS).partitionBy(BIN_COLUMN).mode("error").parquet(
                self.hadoop_path(stage))

    def _group_frame(self, jobs: Sequence[BinJob], spark_schema: Any) -> Any:
        """The group's rows with their bin's index in BIN_COLUMN, a bin's rows all in one partition: one
        scan of every file, tagged by file name, hash-partitioned by bin; a union of one read per bin where
        the group has more than MAP_NAMES_MAX files, a file name repeats in it, an input drops rows (a bin's
        read leaves them out: ``_bin_frame``), or the table has a column ``_metadata`` (which would hide
        Spark's)."""
        names = [[file_name(i) for i in job.locations] for job in jobs]
        flat = [n for ns in names for n in ns]
        if len(flat) > MAP_NAMES_MAX or len(set(flat)) < len(flat) or \
                any(f.name.lower() == "_metadata" for f in spark_schema.fields):
            from functools import reduce

            # a SQL literal, not functions.lit: the same Column works in a classic and a Spark Connect session
            frames = [self._bin_frame(job, spark_schema).selectExpr("*", f"{i} AS {BIN_COLUMN}")
                      for i, job in enumerate(jobs)]
            return reduce(lambda a, b: a.union(b), frames)
        rows = self._read([i for job in jobs for i in job.locations], spark_schema)
        if not any(job.rows_dropped for job in jobs):
            tagged = rows.selectExpr("*", f"try_element_at({bin_map(names)}, _metadata.file_name) AS {BIN_COLUMN}")
        else:
            tagged = less_drops(
                self.spark, positioned(rows).selectExpr("*", f"try_element_at({bin_map(names)}, {ROW_FILE}) AS {BIN_COLUMN}"),
                [i for job in jobs for i in job.inputs])
        return tagged.repartition(self._write_tasks(len(jobs)), BIN_COLUMN)

    def _write_tasks(self, bins: int) -> int:
        """Tasks of a group's write: a task per bin, up to TASKS_PER_SLOT per task slot of the session (a
        task writes each of its bins' files in turn); a task per bin where the slots are unknown (over Spark
        Connect without ``spark.default.parallelism``)."""
        try:
            slots = self.spark.sparkContext.defaultParallelism if not self.connected else \
                self.spark.conf.get("spark.default.parallelism", None)
            return max(1, min(bins, TASKS_PER_SLOT * int(slots))) if slots is not None else bins
        except Exception:  # noqa: BLE001 - no SparkContext here (a shared Databricks cluster), or no number
            return bins

    def _input_footers(self, job: BinJob, schema: pa.Schema) -> list[tuple[Any, pa.Schema]]:
        """(footer, the file's columns but those the rewrite leaves out: footer_check.dropped) of each input;
        Spark reads only ``schema``'s columns, so those are left out of its output."""
        out = []
        for location, (md, file_schema) in zip(job.locations, input_footers(job.locations, self.storage_options)):
            try:
                drop = dropped(md, file_schema, job)
            except VerificationError as e:
                raise VerificationError(f"{location}: {e}") from None
            problem = rename_problem(file_schema, schema, drop)
            if problem:  # Spark's reader would fill the new name with nulls
                raise VerificationError(f"{location}: {problem}; nothing was committed")
            out.append((md, pa.schema([f for f in file_schema if f.name not in drop])))
        return out

    def _bin_frame(self, job: BinJob, spark_schema: Any) -> Any:
        """The bin's rows as one partition (sorted within it for strategy sort), less the rows its inputs
        drop (spark_drops.less_drops: one read of the bin's files; where two of its files share a name, a read per
        input, unioned in input order)."""
        if not job.rows_dropped:
            df = self._read(job.locations, spark_schema)
        elif len({file_name(i) for i in job.locations}) == len(job.inputs):
            df = less_drops(self.spark, positioned(self._read(job.locations, spark_schema)), job.inputs)
        else:
            from functools import reduce

            df = reduce(lambda a, b: a.union(b), [
                less_drops(self.spark, positioned(self._read([one.location], spark_schema)), [one])
                for one in job.inputs])
        df = df.coalesce(1)
        return df.sortWithinPartitions(*job.sort_by) if job.sort_by else df

    def _read(self, locations: Sequence[str], spark_schema: Any) -> Any:
        """The rows of exactly these files, with the table's schema."""
        return self.spark.read.schema(spark_schema).parquet(*(self.hadoop_path(i) for i in locations))

    def hadoop_path(self, uri: str) -> str:
        """``uri`` as this session's Hadoop reaches it: ``s3://`` becomes ``s3a://`` unless the session
        has a filesystem for ``s3`` (EMR, Databricks); compactor itself reads both through its storage."""
        if not uri.startswith("s3://"):
            return uri
        if self._s3_native is None:
            self._s3_native = self._has_s3_filesystem()
        return uri if self._s3_native else hadoop_uri(uri)

    def _has_s3_filesystem(self) -> bool:
        """Whether the session's Hadoop configuration has a filesystem for ``s3``. Over Spark Connect the
        server's Hadoop configuration is out of reach: the session's ``spark.hadoop.fs.s3.impl`` (the server's
        own settings, or the profile's ``conf``) or a Databricks cluster says so."""
        if self.connected:
            conf = self.spark.conf
            return any(conf.get(k, None) for k in ("spark.hadoop.fs.s3.impl",
                                                    "spark.databricks.clusterUsageTags.clusterId"))
        try:
            return self.spark._jsc.hadoopConfiguration().get("fs.s3.impl") is not None
        except Exception:  # noqa: BLE001 - py4j errors: assume open-source Hadoop
            return False

    def _rewrite_bin(self, job: BinJob, schema: pa.Schema, spark_schema: Any) -> WrittenFile:
        fs, _ = filesystem(job.output, self.storage_options)
        footers = self._input_footers(job, schema)
        self._bin_frame(job, spark_schema).write.mode("error").parquet(self.hadoop_path(job.staging))
        _, staging = filesystem(job.staging, self.storage_options)
        outputs = _part_files(fs, staging)
        if len(outputs) != 1:
            raise ApplyError(f"expected one output file from Spark in {job.staging}, found {len(outputs)}")
        written = self._finish(job, outputs[0], footers, schema)
        fs.delete_dir(staging)
        return written

    def _finish(self, job: BinJob, staged: str, footers: list[tuple[Any, pa.Schema]], schema: pa.Schema) -> WrittenFile:
        """Move the bin's file from staging to its final name, and verify it against its inputs."""
        fs, out = filesystem(job.output, self.storage_options)
        rows_in = sum(md.num_rows for md, _ in footers)
        fs.move(staged, out)
        written = pq.ParquetFile(out, filesystem=fs)
        check_written(written, schema, out)
        check_field_ids(written.schema_arrow, schema, out)
        md = written.metadata
        drops = [len(i.drop) for i in job.inputs] if job.rows_dropped else []
        problem = column_problem(footers, md, written.schema_arrow, drops)
        if problem:
            raise VerificationError(f"the rewrite of {len(job.inputs)} file(s) into {job.output}: {problem}; nothing "
                                    "was committed")
        return WrittenFile(job.output, fs.get_file_info(out).size, md.num_rows, rows_in, job.rows_dropped,
                           footer_facts(md, written.schema_arrow))
