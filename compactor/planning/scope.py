"""Which partitions a policy's ``compaction.partitions`` puts in scope, checked against the table's partition
columns before anything is planned (PURE): a ``where`` that does not parse or names another column, or a
``lookback`` on a column that does not partition the table, is the policy's error, at its key."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from compactor.policy.model import TablePolicy
from compactor.policy.predicate import Predicate, PredicateError, parse_where


@dataclass(frozen=True)
class PartitionScope:
    """The parsed ``where`` (None: every partition), or why the policy's scope is wrong (``problem``)."""

    where: Predicate | None = None
    problem: str | None = None


def partition_scope(policy: TablePolicy, partition_columns: Sequence[str], *, column: str = "partition column",
                    columns: str = "partition columns") -> PartitionScope:
    """``policy``'s partition scope against ``partition_columns``; ``column``/``columns``: how the format
    names them in the error (its partition columns, or partition fields)."""
    c = policy.compaction
    where = None
    if c.partitions.where:
        try:
            where = parse_where(c.partitions.where)
        except PredicateError as e:
            return PartitionScope(problem=f"{policy.location('compaction.partitions.where')}: {e}")
        extra = sorted(where.columns - set(partition_columns))
        if extra:
            return PartitionScope(problem=(
                f"{policy.location('compaction.partitions.where')}: where references non-partition column(s) "
                f"{', '.join(extra)}; {columns} are: {', '.join(partition_columns) or '(none)'}"))
    lb = c.partitions.lookback
    if lb is not None and lb.column not in partition_columns:
        return PartitionScope(problem=(
            f"{policy.location('compaction.partitions.lookback')}: lookback column '{lb.column}' is not a "
            f"{column} ({', '.join(partition_columns) or 'none'})"))
    return PartitionScope(where)
