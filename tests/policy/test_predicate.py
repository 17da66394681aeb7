"""The partition `where` predicate shared by validation and planning."""
from __future__ import annotations

import datetime as dt

import pytest

from compactor.policy.predicate import PredicateError, parse_where

TODAY = dt.date(2026, 11, 21)


@pytest.mark.parametrize(("text", "values", "expected"), [
    ("date >= '2026-11-01'", {"date": "2026-11-20"}, True),
    ("date >= '2026-11-01'", {"date": "2026-10-31"}, False),
    ("hour > 9", {"hour": "10"}, True),            # numeric, not string, comparison ('10' < '9' as text)
    ("hour > 9", {"hour": "8"}, False),
    ("region IN ('eu', 'us')", {"region": "eu"}, True),
    ("region IN ('eu', 'us')", {"region": "ap"}, False),
    ("region NOT IN ('eu')", {"region": "ap"}, True),
    ("hour BETWEEN 3 AND 5", {"hour": "5"}, True),
    ("hour BETWEEN 3 AND 5", {"hour": "6"}, False),
    ("region IS NULL", {"region": None}, True),
    ("region IS NOT NULL", {"region": None}, False),
    ("region LIKE 'e%'", {"region": "eu"}, True),
    ("region LIKE 'e%'", {"region": "us"}, False),
    ("NOT (region = 'eu' OR hour = 1)", {"region": "us", "hour": "2"}, True),
    ("region = 'eu' AND hour = 1", {"region": "eu", "hour": "2"}, False),
    ("date >= date_sub(current_date(), 7)", {"date": "2026-11-14"}, True),
    ("date >= date_sub(current_date(), 7)", {"date": "2026-11-13"}, False),
    ("date < current_date()", {"date": "2026-11-21"}, False),
])
def test_evaluate(text: str, values: dict[str, str | None], expected: bool) -> None:
    assert parse_where(text).evaluate(values, today=TODAY) is expected


def test_columns_are_the_referenced_names() -> None:
    assert parse_where("date >= '2026-01-01' AND (region IN ('eu') OR hour IS NULL)").columns == {
        "date", "region", "hour"}


@pytest.mark.parametrize("text", ["date >=", "date = (SELECT 1)", "", "date = 1; DROP TABLE t"])
def test_unsupported_or_broken_syntax_is_a_clear_error(text: str) -> None:
    with pytest.raises(PredicateError):
        parse_where(text)
