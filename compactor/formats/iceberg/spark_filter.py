"""Iceberg's filter ``Expression`` for planned partitions (native_scope.py's scopes), built in the Spark
session's JVM: the native rewrite of data files (spark_native.py) and the rewrite of position delete files
(maintenance_run.py) select exactly the planned partitions with it."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from compactor.formats.iceberg.native_scope import PartitionScope


class IcebergFilter:
    """Iceberg's ``Expressions`` looked up once (py4j resolves a dotted name one round trip per part)."""

    def __init__(self, jvm: Any) -> None:
        self.e = jvm.org.apache.iceberg.expressions.Expressions

    def _term(self, source: str, transform: str, parameter: int | None) -> Any:
        e = self.e
        if transform == "identity":
            return e.ref(source)
        if transform == "bucket":
            return e.bucket(source, parameter)
        if transform == "truncate":
            return e.truncate(source, parameter)
        return getattr(e, transform)(source)  # year, month, day, hour

    def of(self, scopes: Sequence[PartitionScope]) -> Any:
        """``OR`` over the partitions of ``AND`` over each one's fields."""
        e = self.e
        both, either = getattr(e, "and"), getattr(e, "or")  # Python keywords
        out = e.alwaysFalse()
        for scope in scopes:
            part = e.alwaysTrue()
            for t in scope.terms:
                term = self._term(t.source, t.transform, t.parameter)
                part = both(part, e.isNull(term) if t.value is None else e.equal(term, t.value))
            out = either(out, part)
        return out
