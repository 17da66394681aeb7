"""A commit's JSON lines read the same through compactor's fast path (orjson) as through Python's json,
including what orjson refuses: NaN, Infinity, lone surrogates. Integers are exact to 64 bits (the Delta
protocol's longs); beyond that orjson gives a float (documented in formats/delta/log.py)."""

from __future__ import annotations

import json
import math

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from compactor.formats.delta.log import _loads, parse_commit

LINES = [
    '{"add":{"path":"p=1/a%20b.parquet","size":5,"modificationTime":1700000000000,"dataChange":true}}',
    '{"commitInfo":{"operation":"WRITE","u64":18446744073709551615,"i64":-9223372036854775808}}',
    '{"commitInfo":{"x":"\\ud800"}}',
    '{"commitInfo":{"x":Infinity,"y":-Infinity}}',
]


@pytest.mark.parametrize("line", LINES)
def test_a_line_reads_as_pythons_json_reads_it(line: str) -> None:
    got, want = _loads(line), json.loads(line)
    assert repr(got) == repr(want) and type(got) is type(want)


def test_nan_reads_as_nan() -> None:
    assert math.isnan(_loads('{"v": NaN}')["v"])


json_values = st.recursive(
    st.none() | st.booleans() | st.integers(min_value=-(2**63), max_value=2**64 - 1) | st.text()
    | st.floats(allow_nan=False),
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=8), inner, max_size=4),
    max_leaves=20)


@settings(max_examples=300, deadline=None)
@given(json_values)
def test_any_json_line_reads_the_same(value: object) -> None:
    line = json.dumps({"commitInfo": {"v": value}})
    assert repr(_loads(line)) == repr(json.loads(line))


def test_parse_commit_decodes_paths_and_sorts_actions() -> None:
    c = parse_commit(3, "\n".join([LINES[0], '{"remove":{"path":"p=1/old.parquet","dataChange":false}}', LINES[1]]))
    assert list(c.adds) == ["p=1/a b.parquet"] and list(c.removes) == ["p=1/old.parquet"]
    assert c.info["u64"] == 18446744073709551615 and c.operation == "WRITE" and c.adds["p=1/a b.parquet"]["size"] == 5
