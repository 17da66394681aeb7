"""Delta tables written by Spark itself (delta-spark), one function per kind, for interop tests.

Each function takes the shared SparkSession (with the Delta jars) and an empty directory, writes a small
table there through Spark SQL / DataFrame writes, and returns a ``SparkTable`` descriptor. Tables are
tiny (hundreds of rows, tens of files): each builds in a few seconds on a warm session. Session settings
a kind needs (multi-part checkpoint size, OPTIMIZE sizes) are set only for the build and then restored.
"""

from __future__ import annotations

import contextlib
import json
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

#: partition values that need escaping in paths; "" and None are the two kinds of "no value"
AWKWARD_VALUES = ("a b", "a/b", "a=b", "50%", "ünï©ødé", "", None)


@dataclass(frozen=True)
class SparkTable:
    """What a builder made: where, how many live rows, partitioned how, which table features."""

    kind: str
    path: str
    rows: int
    partition_columns: tuple[str, ...] = ()
    #: table features the protocol must list (reader or writer)
    features: tuple[str, ...] = ()
    extra: Mapping[str, Any] = field(default_factory=dict)


@contextlib.contextmanager
def session_conf(spark: Any, conf: Mapping[str, str]) -> Iterator[None]:
    """Set session confs for a block, then restore them (the session is shared by every test)."""
    old = {k: spark.conf.get(k, None) for k in conf}
    for k, v in conf.items():
        spark.conf.set(k, v)
    try:
        yield
    finally:
        for k, v in old.items():
            if v is None:
                spark.conf.unset(k)
            else:
                spark.conf.set(k, v)


def _create(spark: Any, path: str, columns: str, *, partitioned_by: tuple[str, ...] = (),
            cluster_by: tuple[str, ...] = (), properties: Mapping[str, str] | None = None) -> None:
    sql = f"CREATE TABLE delta.`{path}` ({columns}) USING delta"
    if partitioned_by:
        sql += f" PARTITIONED BY ({', '.join(partitioned_by)})"
    if cluster_by:
        sql += f" CLUSTER BY ({', '.join(cluster_by)})"
    if properties:
        sql += " TBLPROPERTIES (" + ", ".join(f"'{k}' = '{v}'" for k, v in properties.items()) + ")"
    spark.sql(sql)


def _append(spark: Any, path: str, start: int, rows: int, select: tuple[str, ...], files: int) -> None:
    """One commit: ``rows`` rows with ids start.., spread over ``files`` write tasks (so up to
    ``files`` files per partition value)."""
    df = spark.range(start, start + rows).selectExpr(*select)
    df.repartition(files).write.format("delta").mode("append").save(path)


def _date_cols(days: int = 3) -> tuple[str, ...]:
    return ("id", f"date_format(date_add(DATE'2024-01-01', CAST(id % {days} AS INT)), 'yyyy-MM-dd') AS date",
            "CAST(id AS DOUBLE) * 1.5 AS amount", "CASE WHEN id % 2 = 0 THEN 'even' ELSE 'odd' END AS kind")


def date_partitioned(spark: Any, path: str | Path, *, appends: int = 4, files: int = 5,
                     rows_per_append: int = 300) -> SparkTable:
    """(a) Many small appends partitioned by a date *string* column: appends x files files per day."""
    p = str(path)
    _create(spark, p, "id BIGINT, date STRING, amount DOUBLE, kind STRING", partitioned_by=("date",))
    for i in range(appends):
        _append(spark, p, i * rows_per_append, rows_per_append, _date_cols(), files)
    return SparkTable("date_partitioned", p, appends * rows_per_append, ("date",))


def int_partitioned(spark: Any, path: str | Path, *, appends: int = 3, files: int = 4) -> SparkTable:
    """(b) Partitioned by an int column (bucket 0..3)."""
    p = str(path)
    _create(spark, p, "id BIGINT, bucket INT, amount DOUBLE", partitioned_by=("bucket",))
    for i in range(appends):
        _append(spark, p, i * 200, 200, ("id", "CAST(id % 4 AS INT) AS bucket", "CAST(id AS DOUBLE) AS amount"),
                files)
    return SparkTable("int_partitioned", p, appends * 200, ("bucket",))


MIXED_PARTITIONS = ("region_id", "day", "ts", "flag", "price")


def mixed_partitioned(spark: Any, path: str | Path, *, appends: int = 2, files: int = 2) -> SparkTable:
    """(b) Partitioned by int + date + timestamp + boolean + decimal columns at once."""
    p = str(path)
    _create(spark, p, "id BIGINT, region_id INT, day DATE, ts TIMESTAMP, flag BOOLEAN, price DECIMAL(10,2), "
            "amount DOUBLE", partitioned_by=MIXED_PARTITIONS)
    select = ("id", "CAST(id % 2 AS INT) AS region_id", "DATE'2024-03-01' + CAST(id % 2 AS INT) AS day",
              "TIMESTAMP'2024-03-01 10:30:00' + make_interval(0, 0, 0, 0, CAST(id % 2 AS INT), 0, 0) AS ts",
              "id % 2 = 0 AS flag", "CAST(12.5 + id % 2 AS DECIMAL(10,2)) AS price", "CAST(id AS DOUBLE) AS amount")
    for i in range(appends):
        _append(spark, p, i * 100, 100, select, files)
    return SparkTable("mixed_partitioned", p, appends * 100, MIXED_PARTITIONS)


def deletion_vectors(spark: Any, path: str | Path, *, appends: int = 2, files: int = 3) -> SparkTable:
    """(c) Deletion vectors on, then a DELETE that hits every file but removes only some rows: the
    files stay and get DV descriptors."""
    p = str(path)
    _create(spark, p, "id BIGINT, date STRING, amount DOUBLE, kind STRING", partitioned_by=("date",),
            properties={"delta.enableDeletionVectors": "true"})
    rows = 0
    for i in range(appends):
        _append(spark, p, i * 300, 300, _date_cols(), files)
        rows += 300
    spark.sql(f"DELETE FROM delta.`{p}` WHERE id % 10 = 0")
    return SparkTable("deletion_vectors", p, rows - rows // 10, ("date",), ("deletionVectors",))


def column_mapping(spark: Any, path: str | Path, *, appends: int = 3, files: int = 3) -> SparkTable:
    """(d) Column mapping in name mode (delta-spark 4.4 picks protocol 2/7: writer feature columnMapping,
    no reader feature list), with ``amount`` renamed to ``total`` after the first append (so physical
    and logical names differ) and more appends after the rename."""
    p = str(path)
    _create(spark, p, "id BIGINT, date STRING, amount DOUBLE, kind STRING", partitioned_by=("date",),
            properties={"delta.columnMapping.mode": "name"})
    _append(spark, p, 0, 300, _date_cols(), files)
    spark.sql(f"ALTER TABLE delta.`{p}` RENAME COLUMN amount TO total")
    cols = tuple(c.replace(" AS amount", " AS total") for c in _date_cols())
    for i in range(1, appends):
        _append(spark, p, i * 300, 300, cols, files)
    return SparkTable("column_mapping", p, appends * 300, ("date",), ("columnMapping",),
                      {"renamed": ("amount", "total")})


def clustered(spark: Any, path: str | Path, *, appends: int = 4, files: int = 3) -> SparkTable:
    """(e) Liquid clustering (CLUSTER BY kind, id): no partition columns."""
    p = str(path)
    _create(spark, p, "id BIGINT, date STRING, amount DOUBLE, kind STRING", cluster_by=("kind", "id"))
    for i in range(appends):
        _append(spark, p, i * 300, 300, _date_cols(), files)
    return SparkTable("clustered", p, appends * 300, (), ("clustering", "domainMetadata"),
                      {"clustering_columns": ("kind", "id")})


def row_tracking(spark: Any, path: str | Path, *, appends: int = 3, files: int = 3) -> SparkTable:
    """(f) Row tracking: every add carries baseRowId / defaultRowCommitVersion."""
    p = str(path)
    _create(spark, p, "id BIGINT, date STRING, amount DOUBLE, kind STRING", partitioned_by=("date",),
            properties={"delta.enableRowTracking": "true"})
    for i in range(appends):
        _append(spark, p, i * 300, 300, _date_cols(), files)
    return SparkTable("row_tracking", p, appends * 300, ("date",), ("rowTracking", "domainMetadata"))


def _many_commits(spark: Any, p: str, commits: int, files: int) -> int:
    rows = 0
    for i in range(commits):
        _append(spark, p, i * 30, 30, _date_cols(), files)
        rows += 30
    return rows


def v2_checkpoint(spark: Any, path: str | Path, *, commits: int = 5) -> SparkTable:
    """(g) ``delta.checkpointPolicy=v2`` with a checkpoint every 2 commits: the log holds
    ``<v>.checkpoint.<uuid>.{json,parquet}`` files (and sidecars under ``_delta_log/_sidecars``)."""
    p = str(path)
    _create(spark, p, "id BIGINT, date STRING, amount DOUBLE, kind STRING", partitioned_by=("date",),
            properties={"delta.checkpointPolicy": "v2", "delta.checkpointInterval": "2"})
    rows = _many_commits(spark, p, commits, 2)
    return SparkTable("v2_checkpoint", p, rows, ("date",), ("v2Checkpoint",))


def multipart_checkpoint(spark: Any, path: str | Path, *, commits: int = 5) -> SparkTable:
    """(g) Classic checkpoints split into parts of at most 5 actions
    (``spark.databricks.delta.checkpoint.partSize``), a checkpoint every 2 commits."""
    p = str(path)
    with session_conf(spark, {"spark.databricks.delta.checkpoint.partSize": "5"}):
        _create(spark, p, "id BIGINT, date STRING, amount DOUBLE, kind STRING", partitioned_by=("date",),
                properties={"delta.checkpointInterval": "2"})
        rows = _many_commits(spark, p, commits, 2)
    return SparkTable("multipart_checkpoint", p, rows, ("date",))


def no_stats(spark: Any, path: str | Path, *, appends: int = 3, files: int = 3) -> SparkTable:
    """(h) ``delta.dataSkippingNumIndexedCols=0``: adds carry no column statistics, but Spark still
    writes ``stats = {"numRecords": n}``."""
    p = str(path)
    _create(spark, p, "id BIGINT, date STRING, amount DOUBLE, kind STRING", partitioned_by=("date",),
            properties={"delta.dataSkippingNumIndexedCols": "0"})
    for i in range(appends):
        _append(spark, p, i * 300, 300, _date_cols(), files)
    return SparkTable("no_stats", p, appends * 300, ("date",))


def stats_off(spark: Any, path: str | Path, *, appends: int = 3, files: int = 3) -> SparkTable:
    """(h) Written with ``spark.databricks.delta.stats.collect=false``: adds have no ``stats`` at all
    (no numRecords either)."""
    p = str(path)
    _create(spark, p, "id BIGINT, date STRING, amount DOUBLE, kind STRING", partitioned_by=("date",))
    with session_conf(spark, {"spark.databricks.delta.stats.collect": "false"}):
        for i in range(appends):
            _append(spark, p, i * 300, 300, _date_cols(), files)
    return SparkTable("stats_off", p, appends * 300, ("date",))


def awkward_partitions(spark: Any, path: str | Path, *, appends: int = 2, files: int = 2) -> SparkTable:
    """(i) String partition values that need escaping: space, '/', '=', '%', unicode, '' and NULL."""
    p = str(path)
    _create(spark, p, "id BIGINT, label STRING, amount DOUBLE", partitioned_by=("label",))
    cases = " ".join(f"WHEN {i} THEN {_sql_str(v)}" for i, v in enumerate(AWKWARD_VALUES))
    select = ("id", f"CASE CAST(id % {len(AWKWARD_VALUES)} AS INT) {cases} END AS label",
              "CAST(id AS DOUBLE) AS amount")
    per = 10 * len(AWKWARD_VALUES)
    for i in range(appends):
        _append(spark, p, i * per, per, select, files)
    return SparkTable("awkward_partitions", p, appends * per, ("label",), (),
                      {"values": AWKWARD_VALUES})


def column_mapping_id(spark: Any, path: str | Path, *, appends: int = 2, files: int = 2) -> SparkTable:
    """(d) Column mapping in id mode (data files carry parquet field ids), a column renamed between two
    appends and a name with a space."""
    p = str(path)
    _create(spark, p, "id BIGINT, date STRING, `unit price` DOUBLE, kind STRING", partitioned_by=("date",),
            properties={"delta.columnMapping.mode": "id"})
    cols = tuple(c.replace(" AS amount", " AS `unit price`") for c in _date_cols())
    _append(spark, p, 0, 300, cols, files)
    spark.sql(f"ALTER TABLE delta.`{p}` RENAME COLUMN kind TO parity")
    cols = tuple(c.replace(" AS kind", " AS parity") for c in cols)
    for i in range(1, appends):
        _append(spark, p, i * 300, 300, cols, files)
    return SparkTable("column_mapping_id", p, appends * 300, ("date",), ("columnMapping",),
                      {"renamed": ("kind", "parity")})


def in_commit_timestamps(spark: Any, path: str | Path, *, appends: int = 2, files: int = 2) -> SparkTable:
    """(j) In-commit timestamps on from the table's creation: every commitInfo comes first and carries an
    ``inCommitTimestamp`` past the previous commit's."""
    p = str(path)
    _create(spark, p, "id BIGINT, date STRING, amount DOUBLE, kind STRING", partitioned_by=("date",),
            properties={"delta.enableInCommitTimestamps": "true"})
    for i in range(appends):
        _append(spark, p, i * 300, 300, _date_cols(), files)
    return SparkTable("in_commit_timestamps", p, appends * 300, ("date",), ("inCommitTimestamp",))


def type_widening(spark: Any, path: str | Path, *, appends: int = 2, files: int = 2) -> SparkTable:
    """(k) Type widening: ``qty`` written as INT, widened to BIGINT (``ALTER COLUMN ... TYPE``), then appended
    with values past the INT range: files of both types in one partition."""
    p = str(path)
    _create(spark, p, "id BIGINT, date STRING, qty INT", partitioned_by=("date",),
            properties={"delta.enableTypeWidening": "true"})
    select = ("id", _date_cols()[1], "CAST(id AS INT) AS qty")
    _append(spark, p, 0, 300, select, files)
    spark.sql(f"ALTER TABLE delta.`{p}` ALTER COLUMN qty TYPE BIGINT")
    select = ("id", _date_cols()[1], "id + 3000000000 AS qty")
    for i in range(1, appends):
        _append(spark, p, i * 300, 300, select, files)
    return SparkTable("type_widening", p, appends * 300, ("date",), ("typeWidening",),
                      {"widened": ("qty", "int", "bigint")})


def change_data_feed(spark: Any, path: str | Path, *, appends: int = 2, files: int = 2) -> SparkTable:
    """(l) Change data feed on, appends and an UPDATE (its commit writes change data files): a compaction
    must add nothing to the feed."""
    p = str(path)
    _create(spark, p, "id BIGINT, date STRING, amount DOUBLE, kind STRING", partitioned_by=("date",),
            properties={"delta.enableChangeDataFeed": "true"})
    for i in range(appends):
        _append(spark, p, i * 300, 300, _date_cols(), files)
    spark.sql(f"UPDATE delta.`{p}` SET amount = -1 WHERE id % 10 = 1")
    return SparkTable("change_data_feed", p, appends * 300, ("date",), ("changeDataFeed",))


def streaming_appends(spark: Any, path: str | Path, *, batches: int = 4, files: int = 2) -> SparkTable:
    """(m) A Structured Streaming query writing the table: ``batches`` micro-batches (one JSON source file
    each, trigger availableNow), each commit with the query's ``txn`` action (appId, version)."""
    root = Path(path)
    src, checkpoint, p = root.parent / f"{root.name}-source", root.parent / f"{root.name}-checkpoint", str(path)
    src.mkdir(parents=True)
    for b in range(batches):
        lines = [json.dumps({"id": b * 100 + k, "date": f"2024-01-0{1 + k % 3}", "amount": k * 1.5})
                 for k in range(100)]
        (src / f"batch-{b:03d}.json").write_text("\n".join(lines) + "\n")
    q = (spark.readStream.schema("id LONG, date STRING, amount DOUBLE").option("maxFilesPerTrigger", 1).json(str(src))
         .repartition(files).writeStream.format("delta").partitionBy("date")
         .option("checkpointLocation", str(checkpoint)).trigger(availableNow=True).start(p))
    q.awaitTermination()
    return SparkTable("streaming_appends", p, batches * 100, ("date",), (), {"batches": batches})


def sized_files(spark: Any, path: str | Path, files: Sequence[tuple[str, int]], *,
                properties: Mapping[str, str] | None = None, create: bool = True) -> SparkTable:
    """One commit writing exactly one file per ``(date, rows)`` entry, so file sizes are chosen by the
    caller (about 70 bytes per row: a 64-char hex digest per row that snappy cannot shrink). One
    ``spark.range`` slice per file and a narrow ``explode``: no shuffle mixes rows of two entries."""
    p = str(path)
    if create:
        _create(spark, p, "id BIGINT, date STRING, payload STRING", partitioned_by=("date",),
                properties=properties)
    n = len(files)
    rows_map = ", ".join(f"{i}, {r}" for i, (_, r) in enumerate(files))
    date_map = ", ".join(f"{i}, {_sql_str(d)}" for i, (d, _) in enumerate(files))
    df = (spark.range(0, n, 1, n)
          .selectExpr("id AS fid", f"element_at(map({date_map}), CAST(id AS INT)) AS date",
                      f"explode(sequence(1, element_at(map({rows_map}), CAST(id AS INT)))) AS k")
          .selectExpr("fid * 1000000 + k AS id", "date",
                      "sha2(concat(CAST(fid AS STRING), '-', CAST(k AS STRING), '-', date), 256) AS payload"))
    df.write.format("delta").mode("append").save(p)
    return SparkTable("sized_files", p, sum(r for _, r in files), ("date",), (),
                      {"files": tuple(files)})


def _sql_str(v: str | None) -> str:
    if v is None:
        return "CAST(NULL AS STRING)"
    return "'" + v.replace("\\", "\\\\").replace("'", "\\'") + "'"


def commit_actions(path: str | Path, version: int) -> list[dict[str, Any]]:
    """The actions of one JSON commit, in file order."""
    f = Path(path) / "_delta_log" / f"{version:020d}.json"
    return [json.loads(line) for line in f.read_text().splitlines() if line.strip()]


def commit_versions(path: str | Path) -> list[int]:
    return sorted(int(f.name[:20]) for f in (Path(path) / "_delta_log").glob("[0-9]" * 20 + ".json"))


def _file_key(action: Mapping[str, Any]) -> tuple[str, str]:
    """A file's identity in log replay: its path plus its deletion vector's id (a DELETE re-adds the
    same path with a DV and removes the path without one)."""
    dv = action.get("deletionVector") or {}
    return action["path"], f"{dv.get('storageType', '')}{dv.get('pathOrInlineDv', '')}@{dv.get('offset', '')}"


def live_adds(path: str | Path) -> list[dict[str, Any]]:
    """The live add actions by replaying every JSON commit (our builders never delete old commits, so
    checkpoints are not needed)."""
    live: dict[tuple[str, str], dict[str, Any]] = {}
    for v in commit_versions(path):
        for a in commit_actions(path, v):
            if "add" in a:
                live[_file_key(a["add"])] = a["add"]
            elif "remove" in a:
                live.pop(_file_key(a["remove"]), None)
    return list(live.values())


BUILDERS: dict[str, Callable[..., SparkTable]] = {
    "date_partitioned": date_partitioned,
    "int_partitioned": int_partitioned,
    "mixed_partitioned": mixed_partitioned,
    "deletion_vectors": deletion_vectors,
    "column_mapping": column_mapping,
    "clustered": clustered,
    "row_tracking": row_tracking,
    "v2_checkpoint": v2_checkpoint,
    "multipart_checkpoint": multipart_checkpoint,
    "no_stats": no_stats,
    "stats_off": stats_off,
    "awkward_partitions": awkward_partitions,
    "column_mapping_id": column_mapping_id,
    "in_commit_timestamps": in_commit_timestamps,
    "type_widening": type_widening,
    "change_data_feed": change_data_feed,
    "streaming_appends": streaming_appends,
}


def deletion_vectors_cdf(spark: Any, path: str | Path, *, appends: int = 4, files: int = 2) -> SparkTable:
    """Deletion vectors and change data feed on (the defaults of a new Databricks table, and common with
    delta-spark): ``appends`` appends of ``files`` files per day, a DELETE of some rows of every file (deletion
    vectors), a DELETE of a whole day (its files removed), and an UPDATE (change data files, new deletion
    vectors). ``extra["ids"]``: the live ids."""
    p = str(path)
    _create(spark, p, "id BIGINT, date STRING, amount DOUBLE, kind STRING", partitioned_by=("date",),
            properties={"delta.enableDeletionVectors": "true", "delta.enableChangeDataFeed": "true"})
    for i in range(appends):
        _append(spark, p, i * 100, 100, _date_cols(), files)
    spark.sql(f"DELETE FROM delta.`{p}` WHERE id % 10 = 0")
    spark.sql(f"DELETE FROM delta.`{p}` WHERE date = '2024-01-03'")
    spark.sql(f"UPDATE delta.`{p}` SET amount = -1 WHERE id % 10 = 1")
    ids = sorted(r[0] for r in spark.sql(f"SELECT id FROM delta.`{p}`").collect())
    return SparkTable("deletion_vectors_cdf", p, len(ids), ("date",), ("deletionVectors", "changeDataFeed"),
                      {"ids": tuple(ids)})
