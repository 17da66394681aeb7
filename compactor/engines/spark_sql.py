"""The Delta SQL the spark engine runs natively (OPTIMIZE, VACUUM, their settings), built as plain strings
so they can be tested without Spark, and the readable part of a Java error."""

from __future__ import annotations

from collections.abc import Mapping, Sequence


def sql_literal(value: str | None) -> str:
    """``value`` as a Spark SQL string literal (NULL for None)."""
    return "NULL" if value is None else "'" + str(value).replace("\\", "\\\\").replace("'", "\\'") + "'"


def partition_predicate(partition: Mapping[str, str | None]) -> str | None:
    """A Spark SQL predicate selecting exactly one partition."""
    if not partition:
        return None
    return " AND ".join(f"`{c}` IS NULL" if v is None else f"`{c}` = {sql_literal(v)}" for c, v in partition.items())


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
