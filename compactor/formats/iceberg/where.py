"""A policy's ``where`` and ``lookback`` on the source columns of an Iceberg table's hidden partitioning
(``where: "event_ts >= '2026-01-01'"`` over ``day(event_ts)``), projected through each partition spec's
transforms (PURE: pyiceberg's own inclusive projection and partition evaluator, as its scan planning uses
them; no I/O).

Inclusive, as Iceberg's: a partition is kept when some row in it could match. Each file is judged under its
own spec (a file of an older spec by that spec's transforms; a spec that does not partition a column keeps
every partition for it). A comparison that no spec can project (``id > 5`` over ``bucket(id)``: a bucket
takes only =, IN and IS NULL; ``ts != ...`` over ``day(ts)``) is the policy's error naming the column and
its transforms, never a silent keep-everything. A lookback on a date or timestamp source column keeps the
partitions that may hold a value from the start of the lookback's first day on (``col >= that midnight``,
projected the same way)."""

from __future__ import annotations

import datetime as dt
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from decimal import Decimal, InvalidOperation
from typing import TYPE_CHECKING, Any

from compactor.formats.iceberg.read import SPEC_COLUMN
from compactor.formats.iceberg.state import IcebergState
from compactor.planning.scope import PartitionFilter, PartitionScope
from compactor.planning.skips import SkipReason
from compactor.policy.model import TablePolicy
from compactor.policy.predicate import constant

if TYPE_CHECKING:
    from pyiceberg.expressions import BooleanExpression
    from pyiceberg.schema import Schema
    from sqlglot import exp


class _Refused(Exception):
    """Why a where cannot select partitions through the transforms (the policy's error)."""


@dataclass(frozen=True)
class _Leaf:
    """One comparison of the where, as written (``NOT`` in front when a NOT above it was pushed down)."""

    column: str
    text: str
    expression: BooleanExpression


def source_columns(st: IcebergState) -> frozenset[str]:
    """The columns a partition field of some spec transforms (void fields partition nothing)."""
    return frozenset(f.source for s in st.specs for f in s.fields if f.source and f.transform != "void")


def _transforms(st: IcebergState, column: str) -> str:
    """``day(ts), bucket[4](ts)``: the transforms of ``column`` across the specs."""
    seen = dict.fromkeys(f"{f.transform}({column})" for s in st.specs for f in s.fields if f.source == column)
    return ", ".join(seen)


def source_filter(policy: TablePolicy, st: IcebergState, partition_columns: Sequence[str], scope: PartitionScope,
                  now: dt.datetime) -> PartitionFilter | str:
    """The verdict on each partition of the where and lookback ``scope`` names on source columns, or the
    policy's error (at its key) when one cannot select partitions."""
    md = st.metadata
    assert md is not None, "an Iceberg state read by state_of carries its metadata"
    schema = md.schema()
    tests: list[tuple[BooleanExpression, str, str]] = []
    if scope.where_on_sources and scope.where is not None:
        key = policy.location("compaction.partitions.where")
        try:
            expression, leaves = _translate(scope.where.tree, schema, now.date())
            for leaf in leaves:
                _check_projectable(leaf, st, schema)
        except _Refused as e:
            return f"{key}: {e}"
        tests.append((expression, SkipReason.OUTSIDE_WHERE, f"not matched by where: {scope.where.text} (projected "
                      f"through {', '.join(_transforms(st, c) for c in sorted(scope.where.columns))})"))
    lb = policy.compaction.partitions.lookback
    if scope.lookback_on_source and lb is not None:
        key = policy.location("compaction.partitions.lookback")
        start = (now - dt.timedelta(seconds=lb.seconds)).astimezone(dt.UTC).replace(hour=0, minute=0, second=0,
                                                                                    microsecond=0)
        try:
            leaf = _lookback(lb.column, start, schema)
            _check_projectable(leaf, st, schema)
        except _Refused as e:
            return f"{key}: {e}"
        tests.append((leaf.expression, SkipReason.OUTSIDE_LOOKBACK,
                      f"{_transforms(st, lb.column)} holds no {lb.column} from {start.date().isoformat()} on "
                      "(the lookback window)"))
    verdicts = [_verdicts(st, partition_columns, expression, schema) for expression, _, _ in tests]

    def judge(values: Mapping[str, str | None]) -> tuple[str, str] | None:
        key = tuple(values.get(c) for c in partition_columns)
        for (_, reason, message), kept in zip(tests, verdicts):
            if not kept.get(key, True):
                return reason, message
        return None

    return judge


def _verdicts(st: IcebergState, columns: Sequence[str], expression: BooleanExpression,
              schema: Schema) -> dict[tuple[str | None, ...], bool]:
    """Per partition (its rendered values by partition column, as the shared planner keys it): whether some
    file of it may hold a row ``expression`` matches, each file judged by its own spec's projection."""
    from pyiceberg.expressions.visitors import expression_evaluator, inclusive_projection
    from pyiceberg.schema import Schema

    assert st.metadata is not None
    specs = st.metadata.specs()
    judges: dict[int, Callable[[Any], bool]] = {}
    out: dict[tuple[str | None, ...], bool] = {}
    for f in st.files:
        judge = judges.get(f.spec_id)
        if judge is None:
            spec = specs[f.spec_id]
            projected = inclusive_projection(schema, spec, True)(expression)
            judge = judges[f.spec_id] = expression_evaluator(Schema(*spec.partition_type(schema).fields), projected,
                                                            True)
        values: dict[str, str | None] = {v.name: v.text for v in f.partition}
        if len(st.specs) > 1:
            values[SPEC_COLUMN] = str(f.spec_id)
        key = tuple(values.get(c) for c in columns)
        out[key] = out.get(key, False) or judge(st.live.data[f.path].file.partition)
    return out


def _check_projectable(leaf: _Leaf, st: IcebergState, schema: Schema) -> None:
    """Refuses a comparison that no spec partitioning its column can project (the projection would keep
    every partition)."""
    from pyiceberg.expressions import AlwaysFalse, AlwaysTrue
    from pyiceberg.expressions.visitors import bind, inclusive_projection

    try:
        bound = bind(schema, leaf.expression, True)
    except Exception as e:  # pyiceberg's ValueError and friends: the literal does not fit the column
        raise _Refused(f"`{leaf.text}`: {leaf.column} cannot be compared so: {_first_line(e)}") from None
    if isinstance(bound, (AlwaysTrue, AlwaysFalse)):
        return  # decided by the column alone (IS NOT NULL of a required column)
    field_id = schema.find_field(leaf.column).field_id
    projected = []
    for spec in st.metadata.specs().values() if st.metadata is not None else ():
        if any(f.source_id == field_id for f in spec.fields):
            try:
                projected.append(inclusive_projection(schema, spec, True)(leaf.expression))
            except Exception as e:  # a transform that refuses the literal (truncate of a float)
                raise _Refused(f"`{leaf.text}` cannot be projected through {_transforms(st, leaf.column)}: "
                               f"{_first_line(e)}") from None
    if projected and all(isinstance(p, AlwaysTrue) for p in projected):
        raise _Refused(
            f"`{leaf.text}` cannot select partitions: column {leaf.column} is partitioned by "
            f"{_transforms(st, leaf.column)}, through which this comparison does not project (a bucket takes "
            "only =, IN and IS NULL; year, month, day, hour and truncate also <, <=, >, >= and LIKE 'prefix%' "
            "on strings; none takes != or NOT IN): write it with comparisons that do, or on the partition fields")


def _first_line(e: BaseException) -> str:
    text = str(e).strip().splitlines()
    return text[0] if text else type(e).__name__


def _lookback(column: str, start: dt.datetime, schema: Schema) -> _Leaf:
    from pyiceberg.types import DateType, TimestampType, TimestamptzType

    field = schema.find_field(column)
    t = field.field_type
    if isinstance(t, DateType):
        value: Any = start.date()
    elif isinstance(t, TimestamptzType):
        value = start
    elif isinstance(t, TimestampType):
        value = start.replace(tzinfo=None)
    else:
        raise _Refused(f"lookback column '{column}' is a {t} column: a lookback on a source column needs a date "
                       "or timestamp column")
    return _Leaf(column, f"{column} >= '{value.isoformat()}'", _leaf([], column, "", "GTE", value))


# ------------------------------------------------------------------ the where as pyiceberg's expression

def _translate(tree: exp.Expr, schema: Schema, today: dt.date) -> tuple[BooleanExpression, list[_Leaf]]:
    """The where as pyiceberg's expression on source columns, NOT pushed down to its comparisons, and those
    comparisons one by one."""
    leaves: list[_Leaf] = []
    return _node(tree, False, schema, today, leaves), leaves


#: a comparison and its negation, and its mirror (the column on the right)
_NEGATED = {"EQ": "NEQ", "NEQ": "EQ", "GT": "LTE", "LTE": "GT", "GTE": "LT", "LT": "GTE"}
_MIRRORED = {"EQ": "EQ", "NEQ": "NEQ", "GT": "LT", "LT": "GT", "GTE": "LTE", "LTE": "GTE"}


def _node(node: exp.Expr, neg: bool, schema: Schema, today: dt.date, leaves: list[_Leaf]) -> BooleanExpression:
    from pyiceberg.expressions import AlwaysFalse, AlwaysTrue, And, Or
    from sqlglot import exp

    def sub(n: exp.Expr, negate: bool = neg) -> BooleanExpression:
        return _node(n, negate, schema, today, leaves)

    if isinstance(node, exp.Paren):
        return sub(node.this)
    if isinstance(node, exp.Not):
        return sub(node.this, not neg)
    if isinstance(node, (exp.And, exp.Or)):
        both = (sub(node.left), sub(node.right))
        return And(*both) if isinstance(node, exp.And) != neg else Or(*both)
    if isinstance(node, exp.Boolean):
        return AlwaysTrue() if bool(node.this) != neg else AlwaysFalse()
    text = ("NOT " if neg else "") + node.sql(dialect="spark")
    if isinstance(node, (exp.EQ, exp.NEQ, exp.GT, exp.GTE, exp.LT, exp.LTE)):
        op = type(node).__name__
        column, other = _column(node.left, schema), node.right
        if column is None:
            column, other, op = _column(node.right, schema), node.left, _MIRRORED[op]
        if column is None or other.find(exp.Column) is not None:
            raise _Refused(f"`{text}`: compare one source column, as it is, with a constant")
        value = _value(constant(other, today), column, schema, text)
        return _leaf(leaves, column, text, _NEGATED[op] if neg else op, value)
    column = _column(node.this, schema) if isinstance(node, (exp.In, exp.Between, exp.Is, exp.Like)) else None
    if column is None:
        raise _Refused(f"`{text}`: a where on source columns takes comparisons of a source column, as it is, with "
                       "constants (=, !=, <, <=, >, >=, IN, BETWEEN, IS NULL, LIKE 'prefix%'), AND, OR and NOT")
    if isinstance(node, exp.In):
        values = [_value(constant(e, today), column, schema, text) for e in node.expressions]
        return _leaf(leaves, column, text, "NOT_IN" if neg else "IN", [v for v in values if v is not None])
    if isinstance(node, exp.Between):
        low = _value(constant(node.args["low"], today), column, schema, text)
        high = _value(constant(node.args["high"], today), column, schema, text)
        a, b = _leaf(leaves, column, text, "LT" if neg else "GTE", low), _leaf(leaves, column, text, "GT" if neg else "LTE", high)
        return Or(a, b) if neg else And(a, b)
    if isinstance(node, exp.Is) and isinstance(node.expression, exp.Null):
        return _leaf(leaves, column, text, "NOT_NULL" if neg else "NULL", None)
    if isinstance(node, exp.Like):
        pattern = constant(node.expression, today)
        prefix = str(pattern)[:-1] if isinstance(pattern, str) and pattern.endswith("%") else None
        if prefix is None or any(ch in prefix for ch in "%_"):
            raise _Refused(f"`{text}`: a LIKE on a source column takes a prefix pattern ('abc%') only")
        return _leaf(leaves, column, text, "NOT_STARTS" if neg else "STARTS", prefix)
    raise _Refused(f"`{text}`: not a comparison a where on source columns takes")


def _column(node: exp.Expr, schema: Schema) -> str | None:
    from sqlglot import exp

    if not isinstance(node, exp.Column):
        return None
    try:
        schema.find_field(node.name, case_sensitive=True)
    except ValueError:
        return None
    return str(node.name)


def _leaf(leaves: list[_Leaf], column: str, text: str, op: str, value: Any) -> BooleanExpression:
    import pyiceberg.expressions as ice

    # pydantic models: their signatures, as mypy's plugin sees them, take keywords only
    kinds: dict[str, Callable[..., BooleanExpression]] = {"EQ": ice.EqualTo, "NEQ": ice.NotEqualTo, "GT": ice.GreaterThan,
                             "GTE": ice.GreaterThanOrEqual, "LT": ice.LessThan, "LTE": ice.LessThanOrEqual,
                             "STARTS": ice.StartsWith, "NOT_STARTS": ice.NotStartsWith, "IN": ice.In,
                             "NOT_IN": ice.NotIn, "NULL": ice.IsNull, "NOT_NULL": ice.NotNull}
    expression: BooleanExpression
    if op in ("NULL", "NOT_NULL"):
        expression = kinds[op](column)
    elif op in ("IN", "NOT_IN") and not value:
        return ice.AlwaysFalse()  # IN of nulls only: no row matches
    elif value is None:
        return ice.AlwaysFalse()  # a comparison with NULL is never true
    else:
        expression = kinds[op](column, value)
    leaves.append(_Leaf(column, text, expression))
    return expression


def _value(value: Any, column: str, schema: Schema, text: str) -> Any:
    """A constant of the where as a value of ``column``'s type (a timestamp without zone read as written, one
    with a zone at UTC when the text names none)."""
    from pyiceberg.types import (
        BooleanType,
        DateType,
        DecimalType,
        DoubleType,
        FloatType,
        IntegerType,
        LongType,
        StringType,
        TimestampType,
        TimestamptzType,
    )

    if value is None:
        return None
    t = schema.find_field(column).field_type
    try:
        if isinstance(t, (TimestampType, TimestamptzType)):
            d = dt.datetime.fromisoformat(str(value).strip().replace("Z", "+00:00"))
            if isinstance(t, TimestampType):
                return d.astimezone(dt.UTC).replace(tzinfo=None) if d.tzinfo else d
            return d if d.tzinfo else d.replace(tzinfo=dt.UTC)
        if isinstance(t, DateType):
            return dt.date.fromisoformat(str(value).strip()[:10])
        if isinstance(t, (IntegerType, LongType)):
            number = Decimal(str(value))
            if number != number.to_integral_value():
                raise ValueError("not a whole number")
            return int(number)
        if isinstance(t, (FloatType, DoubleType)):
            return float(value)
        if isinstance(t, DecimalType):
            return Decimal(str(value))
        if isinstance(t, StringType):
            return str(value)
        if isinstance(t, BooleanType) and str(value).lower() in ("true", "false"):
            return str(value).lower() == "true"
    except (ValueError, InvalidOperation) as e:
        raise _Refused(f"`{text}`: {value!r} is not a value of {column} ({t}): {_first_line(e)}") from None
    raise _Refused(f"`{text}`: a where on a source column of type {t} is not supported")
