"""The Delta SQL compactor runs through the spark engine (OPTIMIZE, VACUUM, their settings), built as
plain strings so they can be tested without Spark."""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from compactor.engines.spark_sql import partition_predicate


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


def vacuum_sql(path: str, retention_hours: int, dry_run: bool, inventory: str | None = None) -> str:
    """Delta's VACUUM statement. Whole hours: delta-spark rounds a fractional retention to the nearest
    hour (``math.round`` in VacuumCommand.gc, delta-spark 4.4), so a fraction would promise a horizon it
    does not keep. ``inventory``: a query of the files (path, length, isDir, modificationTime) the VACUUM
    considers instead of listing the table (``USING INVENTORY``)."""
    if retention_hours != int(retention_hours) or retention_hours < 0:
        raise ValueError(f"a VACUUM's retention is a whole number of hours, not {retention_hours}")
    using = f" USING INVENTORY ({inventory})" if inventory else ""
    return f"VACUUM delta.`{path}`{using} RETAIN {int(retention_hours)} HOURS" + (" DRY RUN" if dry_run else "")


#: the inventory's columns, as Delta's VACUUM ... USING INVENTORY requires them
INVENTORY_SCHEMA = "path STRING, length BIGINT, isDir BOOLEAN, modificationTime BIGINT"


#: delta-spark's default share of a file's rows its deletion vector deletes before OPTIMIZE rewrites it
DEFAULT_MAX_DELETED_ROWS_RATIO = 0.05


def optimize_conf(target_file_size: int, min_file_size: int,
                  max_deleted_rows_ratio: float | None = None) -> dict[str, str]:
    """delta-spark's bin-packing settings (the full key: a short one is silently ignored); the deleted-rows
    ratio always set (a session's own would otherwise choose other candidates than the plan's)."""
    ratio = DEFAULT_MAX_DELETED_ROWS_RATIO if max_deleted_rows_ratio is None else max_deleted_rows_ratio
    return {"spark.databricks.delta.optimize.maxFileSize": str(int(target_file_size)),
            "spark.databricks.delta.optimize.minFileSize": str(int(min_file_size)),
            "spark.databricks.delta.optimize.maxDeletedRowsRatio": repr(float(ratio))}


def reorg_purge_sql(path: str, partition: Mapping[str, str | None]) -> str:
    """delta-spark's purge of soft-deleted rows in one partition (the whole table when unpartitioned)."""
    pred = partition_predicate(partition)
    return f"REORG TABLE delta.`{path}`" + (f" WHERE {pred}" if pred else "") + " APPLY (PURGE)"
