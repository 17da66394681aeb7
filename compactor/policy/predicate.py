"""replaceWhere-style partition predicates: parse once (Spark SQL via sqlglot), list the columns they
reference, and evaluate them against a partition's values without Spark.

Partition values arrive as strings (or None). Comparisons are numeric when both sides look numeric,
otherwise textual, which orders ISO dates and timestamps correctly.
"""

from __future__ import annotations

import datetime as dt
import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from compactor.errors import CompactorError

if TYPE_CHECKING:  # pragma: no cover
    from sqlglot import exp



class PredicateError(CompactorError):
    """The predicate does not parse or uses an unsupported construct."""

    code = "invalid_where"


_NUM = re.compile(r"^[+-]?(\d+(\.\d*)?|\.\d+)([eE][+-]?\d+)?$")



def _plain(error: object) -> str:
    """sqlglot's message without Python internals: "<class 'sqlglot.expressions.core.Paren'>" -> "Paren"."""
    import re

    text = re.sub(r"<class '(?:[\w.]+\.)?(\w+)'>", r"\1", str(error))
    return text.replace("Required keyword: 'this' missing for", "incomplete expression: nothing inside")

def _norm(v: Any) -> Any:
    if isinstance(v, str) and _NUM.match(v.strip()):
        f = float(v)
        return int(f) if f.is_integer() and "." not in v and "e" not in v.lower() else f
    return v


def _compare(a: Any, b: Any) -> tuple[Any, Any] | None:
    if a is None or b is None:
        return None
    na, nb = _norm(a), _norm(b)
    if isinstance(na, (int, float)) and isinstance(nb, (int, float)) and not isinstance(na, bool):
        return na, nb
    return str(a), str(b)


@dataclass(frozen=True)
class Predicate:
    """A parsed partition predicate: its text, its sqlglot tree, and the columns it references."""

    text: str
    tree: exp.Expr = field(repr=False)
    columns: frozenset[str] = frozenset()

    def evaluate(self, values: Mapping[str, str | None], *, today: dt.date | None = None) -> bool:
        return _eval(self.tree, values, today or dt.date.today()) is True


_SUPPORTED_FUNCS = {"current_date", "date_sub", "date_add", "to_date", "lower", "upper", "cast"}


def parse_where(text: str) -> Predicate:
    import sqlglot  # imported on first use: it costs a tenth of a second of CLI start-up
    from sqlglot import exp

    if not isinstance(text, str) or not text.strip():
        raise PredicateError("the predicate is empty")
    try:
        tree = sqlglot.parse_one(text, read="spark")
    except sqlglot.errors.ParseError as e:
        first = e.errors[0]["description"] if getattr(e, "errors", None) else str(e)
        raise PredicateError(f"cannot parse predicate {text!r}: {_plain(first)}") from None
    except Exception as e:  # sqlglot raises a few non-ParseError types on garbage input
        raise PredicateError(f"cannot parse predicate {text!r}: {_plain(e)}") from None
    if isinstance(tree, (exp.Select, exp.Subquery)) or tree.find(exp.Select):
        raise PredicateError("subqueries are not allowed in a partition predicate")
    columns = frozenset(c.name for c in tree.find_all(exp.Column))
    # fail early on constructs evaluate() does not know
    try:
        _eval(tree, {c: None for c in columns}, dt.date.today())
    except PredicateError:
        raise
    return Predicate(text, tree, columns)


def constant(node: exp.Expr, today: dt.date) -> Any:
    """The value of a subexpression that names no column (a literal, ``current_date()``, ``date_sub(...)``),
    as ``Predicate.evaluate`` computes it: a string, a number, a boolean or None."""
    return _eval(node, {}, today)


def _eval(node: exp.Expr, values: Mapping[str, str | None], today: dt.date) -> Any:
    from sqlglot import exp

    def ev(n: exp.Expr) -> Any:
        return _eval(n, values, today)

    if isinstance(node, exp.Paren):
        return ev(node.this)
    if isinstance(node, exp.And):
        a, b = ev(node.left), ev(node.right)
        if a is False or b is False:
            return False
        return None if a is None or b is None else True
    if isinstance(node, exp.Or):
        a, b = ev(node.left), ev(node.right)
        if a is True or b is True:
            return True
        return None if a is None or b is None else False
    if isinstance(node, exp.Not):
        v = ev(node.this)
        return None if v is None else not v
    if isinstance(node, exp.Column):
        return values.get(node.name)
    if isinstance(node, exp.Literal):
        return node.this if node.is_string else _norm(node.this)
    if isinstance(node, exp.Boolean):
        return node.this
    if isinstance(node, exp.Null):
        return None
    if isinstance(node, (exp.Add, exp.Sub, exp.Mul)):
        a, b = _norm(ev(node.left)), _norm(ev(node.right))
        if not isinstance(a, (int, float)) or not isinstance(b, (int, float)):
            return None
        return a + b if isinstance(node, exp.Add) else a - b if isinstance(node, exp.Sub) else a * b
    if isinstance(node, exp.Neg):
        v = ev(node.this)
        return -_norm(v) if v is not None else None
    if isinstance(node, (exp.EQ, exp.NEQ, exp.GT, exp.GTE, exp.LT, exp.LTE)):
        pair = _compare(ev(node.left), ev(node.right))
        if pair is None:
            return None
        a, b = pair
        return {exp.EQ: a == b, exp.NEQ: a != b, exp.GT: a > b, exp.GTE: a >= b, exp.LT: a < b,
                exp.LTE: a <= b}[type(node)]
    if isinstance(node, exp.NullSafeEQ):
        a, b = ev(node.left), ev(node.right)
        pair = _compare(a, b)
        return (a is None and b is None) or (pair is not None and pair[0] == pair[1])
    if isinstance(node, exp.Is):
        v = ev(node.this)
        return v is None if isinstance(node.expression, exp.Null) else v == ev(node.expression)
    if isinstance(node, exp.In):
        if node.args.get("query") is not None:
            raise PredicateError("subqueries are not allowed in a partition predicate")
        v = ev(node.this)
        if v is None:
            return None
        for item in node.expressions:
            pair = _compare(v, ev(item))
            if pair is not None and pair[0] == pair[1]:
                return True
        return False
    if isinstance(node, exp.Between):
        v, lo, hi = ev(node.this), ev(node.args["low"]), ev(node.args["high"])
        p1, p2 = _compare(v, lo), _compare(v, hi)
        if p1 is None or p2 is None:
            return None
        return p1[0] >= p1[1] and p2[0] <= p2[1]
    if isinstance(node, exp.Like):
        v, pat = ev(node.this), ev(node.expression)
        if v is None or pat is None:
            return None
        rx = "^" + "".join(".*" if ch == "%" else "." if ch == "_" else re.escape(ch) for ch in str(pat)) + "$"
        return re.match(rx, str(v), re.S) is not None
    if isinstance(node, (exp.CurrentDate,)):
        return today.isoformat()
    if isinstance(node, (exp.DateSub, exp.DateAdd, exp.TsOrDsAdd)):
        base = ev(node.this)
        n = int(_norm(ev(node.expression)))
        if base is None:
            return None
        d = dt.date.fromisoformat(str(base)[:10])
        delta = dt.timedelta(days=n)
        return (d - delta if isinstance(node, exp.DateSub) else d + delta).isoformat()
    if isinstance(node, (exp.TsOrDsToDate, exp.StrToDate)) or (isinstance(node, exp.Cast)):
        v = ev(node.this)
        return v
    if isinstance(node, exp.Lower):
        v = ev(node.this)
        return None if v is None else str(v).lower()
    if isinstance(node, exp.Upper):
        v = ev(node.this)
        return None if v is None else str(v).upper()
    raise PredicateError(f"unsupported expression in a partition predicate: {node.sql(dialect='spark')!r} "
                         "(use comparisons, IN, BETWEEN, LIKE, IS NULL, AND/OR/NOT, current_date(), date_sub())")
