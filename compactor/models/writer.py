"""What a table's writer should be configured with so that one policy governs both the writer and the
compactor (`compactor compile`): Spark settings and readStream/writeStream options."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any


@dataclass(frozen=True)
class WriterSettings:
    """One streaming policy's writer settings: Spark conf, readStream/writeStream options and notes."""

    table: str
    path: str
    spark_conf: dict[str, str] = field(default_factory=dict)
    write_stream_options: dict[str, str] = field(default_factory=dict)
    notes: tuple[str, ...] = ()
    #: options of the query's file source (readStream), when the policy declares one
    read_stream_options: dict[str, str] = field(default_factory=dict)

    def to_dict(self) -> dict[str, Any]:
        return {"table": self.table, "path": self.path, "spark_conf": dict(self.spark_conf),
                "write_stream_options": dict(self.write_stream_options),
                "read_stream_options": dict(self.read_stream_options), "notes": list(self.notes)}
