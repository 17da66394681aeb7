"""Which partitions a policy's ``compaction.partitions`` puts in scope, checked against the table's partition
columns before anything is planned (PURE): a ``where`` that does not parse or names another column, or a
``lookback`` on a column that does not partition the table, is the policy's error, at its key.

A format whose partitions are transforms of source columns (hidden partitioning: ``day(event_ts)``)
also names those ``sources``: a ``where`` on source columns only, or a ``lookback`` on one, is then in scope
``on_sources``, and the format selects partitions by projecting it through its transforms (the shared
planner takes the format's verdict per partition: ``PartitionFilter``)."""

from __future__ import annotations

from collections.abc import Collection, Mapping, Sequence
from dataclasses import dataclass
from typing import Protocol

from compactor.policy.model import TablePolicy
from compactor.policy.predicate import Predicate, PredicateError, parse_where


class PartitionFilter(Protocol):
    """A format's verdict on one partition (its values by partition column): None when it is in scope, else
    the skip's reason and message."""

    def __call__(self, values: Mapping[str, str | None]) -> tuple[str, str] | None: ...


@dataclass(frozen=True)
class PartitionScope:
    """The parsed ``where`` (None: every partition), or why the policy's scope is wrong (``problem``).
    ``where_on_sources``/``lookback_on_source``: they name source columns of the partitioning (the format
    projects them), not partition columns."""

    where: Predicate | None = None
    problem: str | None = None
    where_on_sources: bool = False
    lookback_on_source: bool = False


def partition_scope(policy: TablePolicy, partition_columns: Sequence[str], *, column: str = "partition column",
                    columns: str = "partition columns", sources: Collection[str] = ()) -> PartitionScope:
    """``policy``'s partition scope against ``partition_columns``; ``column``/``columns``: how the format
    names them in the error (its partition columns, or partition fields); ``sources``: the columns its
    partitions are transforms of, when it can project a predicate on them."""
    c = policy.compaction
    where = None
    on_sources = False
    listed = f"{columns} are: {', '.join(partition_columns) or '(none)'}"
    if sources:
        listed += f"; the source columns they partition are: {', '.join(sorted(sources))}"
    if c.partitions.where:
        try:
            where = parse_where(c.partitions.where)
        except PredicateError as e:
            return PartitionScope(problem=f"{policy.location('compaction.partitions.where')}: {e}")
        named = set(where.columns)
        extra = sorted(named - set(partition_columns) - set(sources))
        if extra:
            return PartitionScope(problem=(
                f"{policy.location('compaction.partitions.where')}: where references non-partition column(s) "
                f"{', '.join(extra)}; {listed}"))
        if not named <= set(partition_columns):
            fields = sorted(named - set(sources))
            if fields:
                return PartitionScope(problem=(
                    f"{policy.location('compaction.partitions.where')}: where mixes partition field(s) "
                    f"{', '.join(fields)} with source column(s) {', '.join(sorted(named - set(partition_columns)))}: "
                    f"write it on source columns only, or on {columns} only; {listed}"))
            on_sources = True
    lb = c.partitions.lookback
    if lb is not None and lb.column not in partition_columns and lb.column not in sources:
        return PartitionScope(problem=(
            f"{policy.location('compaction.partitions.lookback')}: lookback column '{lb.column}' is not a "
            f"{column} ({', '.join(partition_columns) or 'none'})"
            + (f" nor a source column of one ({', '.join(sorted(sources))})" if sources else "")))
    return PartitionScope(where, where_on_sources=on_sources,
                          lookback_on_source=lb is not None and lb.column not in partition_columns)
