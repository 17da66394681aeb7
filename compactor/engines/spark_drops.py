"""The rows a Spark read leaves out of a rewrite: each input's dropped positions (BinInput.drop), matched by
each row's file name and position in its file (Spark's ``_metadata.file_name`` and ``row_index``) in one
anti join with a broadcast table of them, handed to Spark as Arrow in one transfer.

Filtering each input on its own with ``row_index IN (...)`` built the list literal by literal through py4j
and read each such input alone: 20 files of 50,000 rows with 10% dropped took 40-56 s a bin on local[2],
the anti join 4.0-6.8 s (docs/spark-engine.md)."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import pyarrow as pa

from compactor.engines.base import BinInput
from compactor.engines.spark_sql import file_name

#: the columns a read of inputs that drop rows carries until they are dropped: each row's file name and its
#: position in that file (never in a data file)
ROW_FILE, ROW_POSITION = "__compactor_file", "__compactor_row"


def positioned(df: Any) -> Any:
    """``df`` (a read of files) with each row's file name and position in its file in ROW_FILE and
    ROW_POSITION (Spark's ``_metadata``, through ``metadataColumn``: a table's own ``_metadata`` column does
    not hide it)."""
    meta = df.metadataColumn("_metadata")
    return df.select("*", meta.getField("file_name").alias(ROW_FILE), meta.getField("row_index").alias(ROW_POSITION))


def less_drops(spark: Any, rows: Any, inputs: Sequence[BinInput]) -> Any:
    """``rows`` (``positioned``: a read of ``inputs``' files, no two with the same name) less the rows the
    inputs drop, without ROW_FILE and ROW_POSITION."""
    from pyspark.sql.functions import broadcast

    dropping = [i for i in inputs if i.drop]
    table = pa.table({
        ROW_FILE: pa.array([file_name(i.location) for i in dropping for _ in i.drop], pa.string()),
        ROW_POSITION: pa.array([p for i in dropping for p in sorted(i.drop)], pa.int64())})
    drops = broadcast(spark.createDataFrame(table))
    return rows.join(drops, [ROW_FILE, ROW_POSITION], "left_anti").drop(ROW_FILE, ROW_POSITION)
