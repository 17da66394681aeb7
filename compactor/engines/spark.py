"""The spark engine for Delta tables.

``rewrite`` (default): Spark reads exactly the files of each planned bin (never a directory listing),
writes one file per bin into a ``_compactor_staging`` folder of the partition, the file is moved into
the partition under a new name, checked (schema, no INT96), and the swap is committed through delta-rs
with dataChange=false adds (stats from the footer) and removes. ``optimize``: native delta-spark
OPTIMIZE/VACUUM when the session has the Delta jars. pyspark is imported lazily.
"""

from __future__ import annotations

import logging
import posixpath
import uuid
from typing import Any, Mapping, Sequence

import pyarrow as pa

from compactor.engines import delta_commit, delta_guard
from compactor.engines.base import ActionContext, ActionOutcome
from compactor.engines.delta_commit import NewFile, table_fs
from compactor.engines.local import LocalEngine, stats_records
from compactor.engines.parquet_stats import check_written_schema, footer_stats
from compactor.errors import ApplyError, StalePlanError, UnsupportedTableError
from compactor.planning.build import unsupported_reason
from compactor.planning.plan import Action
from compactor.project.model import Target

log = logging.getLogger(__name__)


def _sql_literal(value: str | None) -> str:
    return "NULL" if value is None else "'" + str(value).replace("\\", "\\\\").replace("'", "\\'") + "'"


def partition_predicate(partition: Mapping[str, str | None]) -> str | None:
    """A Spark SQL predicate selecting exactly one partition."""
    if not partition:
        return None
    return " AND ".join(f"`{c}` IS NULL" if v is None else f"`{c}` = {_sql_literal(v)}" for c, v in partition.items())


def optimize_sql(path: str, partition: Mapping[str, str | None], z_order_by: Sequence[str] = ()) -> str:
    sql = f"OPTIMIZE delta.`{path}`"
    pred = partition_predicate(partition)
    if pred:
        sql += f" WHERE {pred}"
    if z_order_by:
        sql += " ZORDER BY (" + ", ".join(f"`{c}`" for c in z_order_by) + ")"
    return sql


def vacuum_sql(path: str, retention_hours: int, dry_run: bool) -> str:
    return f"VACUUM delta.`{path}` RETAIN {int(retention_hours)} HOURS" + (" DRY RUN" if dry_run else "")


class SparkEngine:
    name = "spark"

    def __init__(self, target: Target) -> None:
        self.target = target
        self.storage_options = dict(target.storage_options)
        self._spark: Any = None
        self._owns_session = False
        self._local = LocalEngine(target.storage_options, target.threads)

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

    def run(self, action: Action, ctx: ActionContext) -> ActionOutcome:
        if action.type in ("vacuum", "set_properties"):
            if action.type == "vacuum" and self._native(action):
                return self._native_vacuum(action, ctx)
            return self._local.run(action, ctx)
        reason = unsupported_reason(ctx.state, self.name)
        if reason:
            raise UnsupportedTableError(f"{ctx.table.name}: {reason}")
        if self._native(action):
            return self._native_optimize(action, ctx)
        if action.type == "z_order":
            raise UnsupportedTableError("z-order on the spark engine needs the Delta jars (compaction.method: "
                                        "optimize) - or use the local engine, which z-orders with delta-rs")
        if action.type in ("compact", "sort"):
            return self._rewrite(action, ctx)
        raise ApplyError(f"the spark engine cannot run {action.type} actions")

    # ----------------------------------------------------------------- native delta-spark

    def _native(self, action: Action) -> bool:
        method = action.params.get("method", "rewrite")
        if method == "rewrite":
            return False
        from compactor.engines.spark_session import delta_jars_available

        available = delta_jars_available(self.spark)
        if method == "optimize" and not available:
            raise UnsupportedTableError("compaction.method optimize needs the Delta Lake jars in the Spark session",
                                        hint="add io.delta:delta-spark to spark.jars.packages, or use method rewrite")
        return available

    def _native_optimize(self, action: Action, ctx: ActionContext) -> ActionOutcome:
        conf = {"spark.databricks.delta.optimize.maxFileSize": str(action.params["target_file_size"]),
                "spark.databricks.delta.optimize.minFileSize": str(action.params["min_file_size"])}
        for k, v in conf.items():
            self.spark.conf.set(k, v)
        before = delta_guard.latest_version(ctx.table.path, self.storage_options)
        rows = self.spark.sql(optimize_sql(ctx.table.path, action.partition,
                                           action.params.get("z_order_by") or ())).collect()
        metrics = rows[0]["metrics"] if rows else None
        after = delta_guard.latest_version(ctx.table.path, self.storage_options)
        out = ActionOutcome(version_before=before, version_after=after)
        if metrics is not None:
            out.files_removed, out.files_added = metrics["numFilesRemoved"], metrics["numFilesAdded"]
        if after > before:
            own = delta_guard.read_commit(ctx.table.path, after, self.storage_options)
            if own is not None:
                records = dict(zip(ctx.state.files.column("path").to_pylist(),
                                   ctx.state.files.column("num_records").to_pylist()))
                out = LocalEngine._outcome(own, before, records)
        return out

    def _native_vacuum(self, action: Action, ctx: ActionContext) -> ActionOutcome:
        rows = self.spark.sql(vacuum_sql(ctx.table.path, action.params["retention_hours"], ctx.dry_run)).collect()
        return ActionOutcome(details={"dry_run": ctx.dry_run, "file_count": len(rows)})

    # ----------------------------------------------------------------- the rewrite path

    def _rewrite(self, action: Action, ctx: ActionContext) -> ActionOutcome:
        from deltalake import DeltaTable
        from pyspark.sql.pandas.types import from_arrow_schema

        uri = ctx.table.path
        dt = DeltaTable(uri, storage_options=self.storage_options or None)
        read_version = dt.version()
        snap = pa.table(dt.get_add_actions(flatten=True))
        pcols = list(dt.metadata().partition_columns)
        rows = {r["path"]: r for r in snap.select(
            ["path", "size_bytes", "num_records"] + [f"partition.{c}" for c in pcols]).to_pylist()}
        gone = [p for p in action.input_paths if p not in rows]
        if gone:
            raise StalePlanError(f"{len(gone)} planned input file(s) are no longer live (e.g. {gone[0]})")
        delta_commit.clean_journals(uri, self.storage_options, set(rows))
        arrow_schema = pa.schema(dt.schema().to_arrow())
        data_schema = pa.schema([f for f in arrow_schema if f.name not in pcols])
        spark_schema = from_arrow_schema(data_schema)
        fs, base = table_fs(uri)
        marker = ctx.commit_metadata["compactor.action"]
        journal = marker.replace(":", "_").replace("/", "_") + "-" + uuid.uuid4().hex[:8]
        added: list[NewFile] = []
        removed: list[dict[str, Any]] = []
        staging_dirs: list[str] = []
        try:
            for i, bin_files in enumerate(action.bins):
                pv = {c: rows[bin_files[0]][f"partition.{c}"] for c in pcols}
                if any({c: rows[p][f"partition.{c}"] for c in pcols} != pv for p in bin_files):
                    raise ApplyError("a bin mixes files of different partitions; refusing to rewrite it")
                part_dir = posixpath.dirname(bin_files[0])
                # one `_`-prefixed folder per bin: Spark and Delta readers ignore it
                staging = posixpath.join(part_dir, f"_compactor_staging_{journal}_{i}") if part_dir \
                    else f"_compactor_staging_{journal}_{i}"
                final = delta_commit.new_file_name(part_dir)
                staging_dirs.append(staging)
                delta_commit.write_journal(uri, journal, {"files": [f.path for f in added] + [final],
                                                          "staging": staging_dirs})
                self._write_bin(uri, bin_files, spark_schema, staging, action)
                self._move_single_output(fs, base, staging, final)
                local_final = f"{base}/{final}"
                check_written_schema(local_final, data_schema, fs)
                n, stats = footer_stats(local_final, fs)
                added.append(NewFile(final, fs.get_file_info(local_final).size, pv, stats, n))
                removed += [{"path": p, "size_bytes": rows[p]["size_bytes"], "partition_values": pv} for p in bin_files]
            delta_commit.commit_rewrite(uri, self.storage_options, removed=removed, added=added,
                                        partition_columns=pcols, commit_metadata=ctx.commit_metadata)
        except BaseException:
            self._discard_uncommitted(uri, journal, [f.path for f in added], staging_dirs)
            raise
        delta_commit.clear_journal(uri, journal)
        own = delta_guard.find_own_commit(uri, self.storage_options, read_version, marker)
        records = {p: r["num_records"] for p, r in rows.items()}
        outcome = LocalEngine._outcome(own, read_version, records)
        outcome.details["bins"] = len(action.bins)
        overlap = delta_guard.find_overlapping_removes(uri, self.storage_options, read_version, own.version,
                                                       own.removes)
        if overlap:
            repair_v = delta_guard.repair_duplicate_commit(uri, self.storage_options, own, overlap,
                                                           {**ctx.commit_metadata, "compactor.action": marker + ":repair"},
                                                           records)
            outcome.details["repaired"] = {"overlapping_removes": len(overlap), "repair_version": repair_v}
            outcome.version_after = repair_v
            outcome.files_added = outcome.files_removed = 0
        if outcome.rows_added is None:
            outcome.rows_added = sum(stats_records(a) or 0 for a in own.adds.values())
        return outcome

    def _discard_uncommitted(self, uri: str, journal: str, files: Sequence[str], staging_dirs: Sequence[str]) -> None:
        """Delete what a failed rewrite wrote - unless the commit landed after all (an interrupt inside
        the commit call): files the log references are never deleted. If the log cannot be read, the
        journal stays and the next run's clean_journals decides."""
        from deltalake import DeltaTable

        fs, base = table_fs(uri)
        try:
            live = set(pa.table(DeltaTable(uri, storage_options=self.storage_options or None)
                                .get_add_actions(flatten=True)).column("path").to_pylist())
        except Exception:  # noqa: BLE001 - any failure to read the log means: decide later
            log.warning("%s: cannot read the log to clean up; journal %s kept for the next run", uri, journal)
            return
        for path in files:
            if path not in live:
                delta_commit.delete_quietly(fs, f"{base}/{path}")
        for staging in staging_dirs:
            delta_commit.delete_quietly(fs, f"{base}/{staging}")
        delta_commit.clear_journal(uri, journal)

    def _write_bin(self, uri: str, files: Sequence[str], schema: Any, staging: str, action: Action) -> None:
        root = uri.rstrip("/")
        df = self.spark.read.schema(schema).parquet(*[f"{root}/{p}" for p in files])
        df = df.coalesce(1)
        if action.type == "sort":
            df = df.sortWithinPartitions(*action.params.get("sort_by", []))
        df.write.mode("errorifexists").parquet(f"{root}/{staging}")

    @staticmethod
    def _move_single_output(fs: Any, base: str, staging: str, final: str) -> None:
        import pyarrow.fs as pafs

        outputs = [i.path for i in fs.get_file_info(pafs.FileSelector(f"{base}/{staging}"))
                   if i.type == pafs.FileType.File and posixpath.basename(i.path).startswith("part-")
                   and i.path.endswith(".parquet")]
        if len(outputs) != 1:
            raise ApplyError(f"expected one output file from Spark in {staging}, found {len(outputs)}")
        fs.move(outputs[0], f"{base}/{final}")
        delta_commit.delete_quietly(fs, f"{base}/{staging}")
