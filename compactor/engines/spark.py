"""The spark engine: Spark jobs rewrite the planned bins, and delta-spark SQL runs natively when the
session has the Delta jars (OPTIMIZE, VACUUM). Compute only: the Delta format commits.

Rewrite: for each bin, Spark reads exactly the bin's files (never a directory listing) with the table's
data schema, writes one file into a `_`-prefixed staging folder next to the output, and the file is moved
to its final, unique name. Bins are submitted concurrently from a driver-side thread pool (Spark runs jobs
from several threads at once), so a cluster works on as many bins as it has cores.
pyspark is imported lazily.
"""

from __future__ import annotations

import logging
import posixpath
from collections.abc import Callable, Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from typing import Any

import pyarrow as pa
import pyarrow.fs as pafs
import pyarrow.parquet as pq

from compactor.engines.base import BinJob, WrittenFile, reporting
from compactor.engines.footer_check import column_problem, input_footers, rename_problem
from compactor.engines.parquet_stats import check_written_schema, footer_stats
from compactor.errors import ApplyError, VerificationError
from compactor.project.model import Target
from compactor.runtime.paths import filesystem, hadoop_uri

log = logging.getLogger(__name__)


def _sql_literal(value: str | None) -> str:
    return "NULL" if value is None else "'" + str(value).replace("\\", "\\\\").replace("'", "\\'") + "'"


def partition_predicate(partition: Mapping[str, str | None]) -> str | None:
    """A Spark SQL predicate selecting exactly one partition."""
    if not partition:
        return None
    return " AND ".join(f"`{c}` IS NULL" if v is None else f"`{c}` = {_sql_literal(v)}" for c, v in partition.items())


def optimize_sql(path: str, partitions: Mapping[str, str | None] | Sequence[Mapping[str, str | None]],
                 z_order_by: Sequence[str] = ()) -> str:
    """OPTIMIZE of one partition, or of several at once (``partitions`` a list: their predicates OR-ed)."""
    sql = f"OPTIMIZE delta.`{path}`"
    preds = [partition_predicate(p) for p in ([partitions] if isinstance(partitions, Mapping) else partitions)]
    if len(preds) == 1 and preds[0]:
        sql += f" WHERE {preds[0]}"
    elif len(preds) > 1 and all(preds):
        sql += " WHERE " + " OR ".join(f"({p})" for p in preds)
    if z_order_by:
        sql += " ZORDER BY (" + ", ".join(f"`{c}`" for c in z_order_by) + ")"
    return sql


def vacuum_sql(path: str, retention_hours: int, dry_run: bool) -> str:
    return f"VACUUM delta.`{path}` RETAIN {int(retention_hours)} HOURS" + (" DRY RUN" if dry_run else "")


def java_error(e: BaseException, limit: int = 600) -> str:
    """The readable part of an error raised through py4j: the Java exception's message and its root
    cause ("Caused by:"), without the stack frames (a Py4JJavaError's text is the whole Java stack)."""
    lines = [ln.strip() for ln in str(e).splitlines()]
    lines = [ln for ln in lines if ln and not ln.startswith(("at ", "...", "JVM stacktrace:"))
             and not ln.startswith("An error occurred while calling")]
    head = lines[0].lstrip(": ") if lines else type(e).__name__
    causes = [ln for ln in lines if ln.startswith("Caused by:")]
    text = head if not causes or causes[-1][len("Caused by:"):].strip() in head else f"{head} ({causes[-1]})"
    return text if len(text) <= limit else text[:limit] + "..."


def optimize_conf(target_file_size: int, min_file_size: int) -> dict[str, str]:
    """delta-spark's bin-packing settings (the full key: a short one is silently ignored)."""
    return {"spark.databricks.delta.optimize.maxFileSize": str(int(target_file_size)),
            "spark.databricks.delta.optimize.minFileSize": str(int(min_file_size))}


class SparkEngine:
    name = "spark"

    def __init__(self, target: Target) -> None:
        self.target = target
        self.storage_options = dict(target.storage_options)
        self._spark: Any = None
        self._owns_session = False
        self._s3_native: bool | None = None

    @property
    def spark(self) -> Any:
        if self._spark is None:
            from pyspark.sql import SparkSession

            from compactor.engines.spark_session import get_or_create_session

            self._owns_session = SparkSession.getActiveSession() is None
            self._spark = get_or_create_session(self.target.spark)
        return self._spark

    def versions(self) -> dict[str, str]:
        import deltalake
        import pyspark

        return {"pyspark": pyspark.__version__, "deltalake": deltalake.__version__, "pyarrow": pa.__version__}

    def close(self) -> None:
        if self._spark is not None and self._owns_session:
            self._spark.stop()
        self._spark = None

    # ----------------------------------------------------------------- native delta-spark

    def delta_sql_available(self) -> bool:
        from compactor.engines.spark_session import delta_sql_enabled

        return delta_sql_enabled(self.spark)

    def sql(self, statement: str, conf: Mapping[str, str] | None = None) -> list[Any]:
        """Run one statement (with session settings applied first) and collect its rows. A failure in
        the JVM is an ApplyError naming the statement and the Java error, not a page of Java stack."""
        for k, v in (conf or {}).items():
            self.spark.conf.set(k, v)
        try:
            return self.spark.sql(statement).collect()
        except Exception as e:
            if not type(e).__module__.startswith(("py4j", "pyspark")):
                raise
            raise ApplyError(f"{statement}: {java_error(e)}") from e

    # ----------------------------------------------------------------- the rewrite path

    def max_concurrent_rewrites(self) -> int:
        if self.target.threads:
            return int(self.target.threads)
        return max(1, int(self.spark.sparkContext.defaultParallelism))

    def rewrite(self, jobs: Sequence[BinJob], schema: pa.Schema,
                on_done: Callable[[BinJob, WrittenFile], None] | None = None) -> list[WrittenFile]:
        from pyspark.sql.pandas.types import from_arrow_schema

        spark_schema = from_arrow_schema(schema)
        one = reporting(lambda j: self._rewrite_bin(j, schema, spark_schema), on_done)
        workers = min(self.max_concurrent_rewrites(), len(jobs)) if jobs else 1
        if workers <= 1:
            return [one(j) for j in jobs]
        with ThreadPoolExecutor(max_workers=workers, thread_name_prefix="spark-bin") as pool:
            return list(pool.map(one, jobs))

    def hadoop_path(self, uri: str) -> str:
        """``uri`` as this session's Hadoop reaches it: ``s3://`` becomes ``s3a://`` unless the session
        has a filesystem for ``s3`` (EMR, Databricks); compactor itself reads both through its storage."""
        if not uri.startswith("s3://"):
            return uri
        if self._s3_native is None:
            try:
                self._s3_native = self.spark._jsc.hadoopConfiguration().get("fs.s3.impl") is not None
            except Exception:  # noqa: BLE001 - py4j errors: assume open-source Hadoop
                self._s3_native = False
        return uri if self._s3_native else hadoop_uri(uri)

    def native_commits_safe(self, uri: str) -> bool:
        """Whether delta-spark commits to ``uri`` safely against concurrent writers. Not on S3 with
        open-source delta-spark's default log store (S3SingleDriverLogStore: mutual exclusion only inside
        one JVM), unless the session configures a log store (e.g. S3DynamoDBLogStore) or runs on
        Databricks; compactor then rewrites and commits through delta-rs, whose commits are
        create-if-absent PUTs."""
        if not uri.startswith(("s3://", "s3a://", "s3n://")):
            return True
        conf = self.spark.conf
        keys = ("spark.delta.logStore.s3.impl", "spark.delta.logStore.s3a.impl", "spark.delta.logStore.class",
                "spark.databricks.clusterUsageTags.clusterId")
        return any(conf.get(k, None) for k in keys)

    def _rewrite_bin(self, job: BinJob, schema: pa.Schema, spark_schema: Any) -> WrittenFile:
        fs, out = filesystem(job.output, self.storage_options)
        footers = input_footers(job.inputs, self.storage_options)
        rows_in = sum(md.num_rows for md, _ in footers)
        for location, (_, file_schema) in zip(job.inputs, footers):
            problem = rename_problem(file_schema, schema, job.partition_columns)
            if problem:  # Spark's reader would fill the new name with nulls
                raise VerificationError(f"{location}: {problem}; nothing was committed")
        df = self.spark.read.schema(spark_schema).parquet(*(self.hadoop_path(i) for i in job.inputs)).coalesce(1)
        if job.sort_by:
            df = df.sortWithinPartitions(*job.sort_by)
        df.write.mode("errorifexists").parquet(self.hadoop_path(job.staging))
        _, staging = filesystem(job.staging, self.storage_options)
        outputs = [i.path for i in fs.get_file_info(pafs.FileSelector(staging))
                   if i.type == pafs.FileType.File and posixpath.basename(i.path).startswith("part-")
                   and i.path.endswith(".parquet")]
        if len(outputs) != 1:
            raise ApplyError(f"expected one output file from Spark in {job.staging}, found {len(outputs)}")
        fs.move(outputs[0], out)
        fs.delete_dir(staging)
        check_written_schema(out, schema, fs)
        written = pq.ParquetFile(out, filesystem=fs)
        kept = [(md, pa.schema([f for f in sch if f.name not in job.partition_columns])) for md, sch in footers]
        problem = column_problem(kept, written.metadata, written.schema_arrow)
        if problem:
            raise VerificationError(f"the rewrite of {len(job.inputs)} file(s) into {job.output}: {problem}; nothing "
                                    "was committed")
        rows, stats = footer_stats(out, fs)
        return WrittenFile(job.output, fs.get_file_info(out).size, rows, rows_in, stats)
