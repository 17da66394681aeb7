"""The live files' paths as the log spells them -> as they are on storage (formats/delta/read/state.py
``_logical_paths``): exactly the paths holding a character outside delta-rs' safe set are URL-decoded,
and those whose encoding delta-rs would not reproduce are reported. The function first looks at the
array's bytes as a whole (no regular expression per path unless one may need it); these cases hold it to
the per-path definition, on slices (whose neighbours share the data buffer) and chunked arrays too."""

from __future__ import annotations

import re
from urllib.parse import quote, unquote

import pyarrow as pa
from hypothesis import given, settings
from hypothesis import strategies as st

from compactor.formats.delta.read.state import DELTA_RS_SAFE, _logical_paths

NEEDS_LOOK = re.compile(r"[^A-Za-z0-9/!$&'()+,\-.:;=@_~]")


def reference(paths: list[str]) -> tuple[list[str], frozenset[str]]:
    out, unremovable = [], set()
    for p in paths:
        if NEEDS_LOOK.search(p):
            decoded = unquote(p)
            out.append(decoded)
            if quote(decoded, safe=DELTA_RS_SAFE) != p:
                unremovable.add(decoded)
        else:
            out.append(p)
    return out, frozenset(unremovable)


ALPHABET = st.sampled_from(list("abcXYZ019/._-=~!$&'()+,;:@") + ["%20", "%3A", "%25", " ", "é", "日", "#", "%", "?"])
PATHS = st.lists(st.lists(ALPHABET, min_size=1, max_size=12).map("".join), max_size=30)


@settings(max_examples=300, deadline=None)
@given(PATHS)
def test_paths_decode_as_the_per_path_definition_says(paths: list[str]) -> None:
    got, unremovable = _logical_paths(pa.array(paths, pa.string()))
    want, want_unremovable = reference(paths)
    assert got.to_pylist() == want and unremovable == want_unremovable and got.type == pa.string()


@settings(max_examples=200, deadline=None)
@given(PATHS, PATHS, PATHS)
def test_a_slice_is_judged_by_its_own_paths(before: list[str], paths: list[str], after: list[str]) -> None:
    """A slice's data buffer holds its neighbours' bytes too: a neighbour needing a look never decodes a
    plain path, and a slice of plain paths beside special ones stays as it is."""
    arr = pa.array(before + paths + after, pa.string()).slice(len(before), len(paths))
    got, unremovable = _logical_paths(arr)
    want, want_unremovable = reference(paths)
    assert got.to_pylist() == want and unremovable == want_unremovable


@settings(max_examples=100, deadline=None)
@given(st.lists(PATHS, max_size=4))
def test_a_chunked_array_reads_as_one(chunks: list[list[str]]) -> None:
    arr = pa.chunked_array([pa.array(c, pa.string()) for c in chunks], pa.string())
    got, unremovable = _logical_paths(arr)
    want, want_unremovable = reference([p for c in chunks for p in c])
    assert got.to_pylist() == want and unremovable == want_unremovable


def test_plain_paths_come_back_as_the_same_array() -> None:
    """The common case touches nothing: the array itself is returned, no path is decoded."""
    arr = pa.array(["part=a/x-1.parquet", "part=b/y_2~.parquet"], pa.string())
    got, unremovable = _logical_paths(arr)
    assert got is arr and unremovable == frozenset()


def test_a_large_string_array_is_cast_and_decoded() -> None:
    got, unremovable = _logical_paths(pa.array(["a%20b/c.parquet", "d/e.parquet"], pa.large_string()))
    assert got.type == pa.string() and got.to_pylist() == ["a b/c.parquet", "d/e.parquet"]
    assert unremovable == frozenset()


def test_a_path_past_the_first_mebibyte_of_bytes_is_decoded() -> None:
    """The bytes are read a MiB at a time: the one path needing a look, after 1.2 MB of plain ones, is
    still found (and so is one in the first MiB)."""
    plain = [f"part=p{i % 7}/part-{i:08d}-c0a1b2c3-d4e5-f6a7.parquet" for i in range(30_000)]
    assert sum(len(p) for p in plain) > 1.1 * (1 << 20)
    for paths in (plain + ["part=p1/last%20one.parquet"], ["x%20y/first.parquet"] + plain):
        got, _ = _logical_paths(pa.array(paths, pa.string()))
        assert got.to_pylist() == reference(paths)[0] != paths
