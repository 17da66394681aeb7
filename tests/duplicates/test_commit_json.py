"""A commit's JSON lines read the same through compactor's fast path (orjson) as through Python's json,
including what orjson refuses: NaN, Infinity, lone surrogates. Integers are exact to 64 bits (the Delta
protocol's longs); beyond that orjson gives a float (documented in formats/delta/read/log.py)."""

from __future__ import annotations

import json
import math

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from compactor.formats.delta.read.log import _loads, parse_commit

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


# ----------------------------------------------------------------- add/remove lines kept unparsed


def _full(text: str) -> tuple[dict, dict]:
    """What parse_commit gave when it parsed every line: adds and removes by decoded path."""
    from urllib.parse import unquote

    adds, removes = {}, {}
    for line in text.split("\n"):
        if not line.strip():
            continue
        obj = json.loads(line)
        if "add" in obj:
            adds[unquote(obj["add"]["path"])] = obj["add"]
        elif "remove" in obj:
            removes[unquote(obj["remove"]["path"])] = obj["remove"]
    return adds, removes


paths = st.text(min_size=1, max_size=40)
actions = st.tuples(st.sampled_from(["add", "remove"]), paths, st.integers(0, 2**63 - 1), st.booleans(),
                    st.sampled_from([(",", ":"), (", ", ": ")]), st.booleans())


@settings(max_examples=500, deadline=None)
@given(st.lists(actions, min_size=1, max_size=6))
def test_unparsed_actions_read_as_parsed_ones(lines: list) -> None:
    """Any path (quotes, backslashes, percent escapes, control characters, U+2028, non-ASCII), both
    writers' spacing, the path first or not: the commit's adds and removes, keys and every field, are
    what parsing each line whole gives."""
    text = []
    for kind, path, size, path_first, separators, ascii_only in lines:
        fields = {"path": path, "size": size, "dataChange": not path_first, "stats": json.dumps({"numRecords": size})}
        if not path_first:
            fields = {"size": size, **{k: v for k, v in fields.items() if k != "size"}}
        text.append(json.dumps({kind: fields}, separators=separators, ensure_ascii=ascii_only))
    commit = parse_commit(1, "\n".join(text))
    adds, removes = _full("\n".join(text))
    assert list(commit.adds) == list(adds) and list(commit.removes) == list(removes)
    for got, want in ((commit.adds, adds), (commit.removes, removes)):
        for p in want:
            assert dict(got[p]) == want[p] and got[p].get("dataChange") == want[p]["dataChange"]


def test_a_raw_line_separator_in_a_value_does_not_split_the_line() -> None:
    """A commit is newline-delimited: U+2028 and U+0085 inside a string (a stats min value) are text."""
    line = json.dumps({"add": {"path": "a.parquet", "stats": json.dumps({"minValues": {"s": "x\u2028y\x85z"}},
                                                                          ensure_ascii=False)}}, ensure_ascii=False)
    c = parse_commit(2, line + "\n" + LINES[1])
    assert json.loads(c.adds["a.parquet"]["stats"])["minValues"]["s"] == "x\u2028y\x85z" and c.operation == "WRITE"


def test_only_plain_paths_skip_the_parse() -> None:
    from compactor.formats.delta.read.log import LoggedAction

    c = parse_commit(4, "\n".join([
        '{"add":{"path":"plain.parquet","size":1}}',
        '{"add":{"path":"with\\"quote.parquet","size":2}}',
        '{"add": {"path": "spaced.parquet", "size": 3}}',
        '{"add":{"size":4,"path":"late.parquet"}}']))
    kinds = {p: type(a) for p, a in c.adds.items()}
    assert kinds == {"plain.parquet": LoggedAction, 'with"quote.parquet': dict, "spaced.parquet": LoggedAction,
                     "late.parquet": dict}
    assert [a["size"] for a in c.adds.values()] == [1, 2, 3, 4]


# ----------------------------------------------------------------- may a commit be a rewrite (unparsed)

change_values = st.sampled_from([True, False, None, 0, 1, "", "false", [], {}, 0.0]) | json_values
key_spellings = st.sampled_from(["dataChange", "data\\u0043hange", "\\u0064ataChange"])


@settings(max_examples=500, deadline=None)
@given(st.lists(st.tuples(st.sampled_from(["add", "remove", "commitInfo"]), paths, st.booleans(), change_values,
                          key_spellings, st.sampled_from([(",", ":"), (", ", ": "), (",", " : ")]), st.booleans(),
                          json_values), min_size=1, max_size=5))
def test_a_commit_called_no_rewrite_parses_to_no_rewrite(lines: list) -> None:
    """detection.may_rewrite reads the raw text: whatever it calls safe (False) must parse to a commit that
    is no rewrite (no adds and removes, or one of them changes data), whatever the dataChange values (any
    JSON type), the key's spelling (escapes), the spacing or the other fields (a nested "dataChange" too)."""
    from compactor.formats.delta.duplicates.detection import may_rewrite

    text = []
    for kind, path, has_key, value, key, separators, ascii_only, extra in lines:
        fields: dict = {"path": path, "size": 1, "extra": {"dataChange": extra}}
        if has_key:
            fields["KEY"] = value
        line = json.dumps({kind: fields}, separators=separators, ensure_ascii=ascii_only)
        text.append(line.replace('"KEY"', f'"{key}"', 1))
    commit_text = "\n".join(text) + "\n"
    c = parse_commit(1, commit_text)
    if not may_rewrite(commit_text):
        assert not (c.adds or c.removes) or c.data_change, commit_text
