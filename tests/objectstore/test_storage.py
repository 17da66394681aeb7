"""compactor.runtime.storage against local disk, moto's S3 server and Azurite (real servers on loopback)."""

from __future__ import annotations

import re
import threading
import time

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from compactor.errors import CompactorError
from compactor.runtime.storage import ObjectNotFoundError, ObjectVersion, Storage, StorageError, split_options


@pytest.fixture
def st(store_root) -> Storage:
    return Storage.for_uri(store_root.uri, store_root.storage_options)


def race(n: int, fn) -> list[int]:
    """Run ``fn(i)`` in ``n`` threads released together; the indexes whose call returned True."""
    barrier = threading.Barrier(n)
    wins: list[int] = []
    errors: list[BaseException] = []

    def run(i: int) -> None:
        barrier.wait()
        try:
            if fn(i):
                wins.append(i)
        except BaseException as e:  # noqa: BLE001 - reported below
            errors.append(e)

    threads = [threading.Thread(target=run, args=(i,)) for i in range(n)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout=60)
    assert not errors, errors
    return wins


def test_write_read_overwrite(st):
    st.write_bytes("a/b.txt", b"one")
    assert st.read_bytes("a/b.txt") == b"one"
    st.write_bytes("a/b.txt", b"two")
    assert st.read_bytes("a/b.txt") == b"two"


def test_read_missing_raises_not_found(st):
    with pytest.raises(ObjectNotFoundError) as e:
        st.read_bytes("nope/missing.json")
    assert isinstance(e.value, StorageError) and isinstance(e.value, CompactorError)
    assert "missing.json" in str(e.value)


def test_create_exclusive(st):
    assert st.create_exclusive("_compactor/lease.json", b"first")
    assert not st.create_exclusive("_compactor/lease.json", b"second")
    assert st.read_bytes("_compactor/lease.json") == b"first"


def test_create_exclusive_race_exactly_one_wins(st):
    for round_ in range(5):
        path = f"race/{round_}.json"
        wins = race(8, lambda i: st.create_exclusive(path, f"writer-{i}".encode()))
        assert len(wins) == 1, wins
        assert st.read_bytes(path) == f"writer-{wins[0]}".encode()
    # no temp files left behind (local) / nothing but the five objects (stores)
    assert [o.path for o in st.list("race")] == [f"race/{i}.json" for i in range(5)]


def test_put_if_match(st):
    st.write_bytes("v.json", b"v1")
    data, v1 = st.read_versioned("v.json")
    assert data == b"v1"
    assert st.put_if_match("v.json", b"v2", v1)
    assert st.read_bytes("v.json") == b"v2"
    assert not st.put_if_match("v.json", b"v3", v1), "a stale version must not replace"
    assert st.read_bytes("v.json") == b"v2"
    _, v2 = st.read_versioned("v.json")
    assert v2 != v1
    assert not st.put_if_match("gone.json", b"x", v2), "no object, no replace"
    assert not st.exists("gone.json")


def test_put_if_match_race_exactly_one_wins(st):
    st.write_bytes("cas.json", b"start")
    for round_ in range(3):
        _, v = st.read_versioned("cas.json")
        wins = race(8, lambda i: st.put_if_match("cas.json", f"r{round_}-w{i}".encode(), v))
        assert len(wins) == 1, wins
        assert st.read_bytes("cas.json") == f"r{round_}-w{wins[0]}".encode()


def test_delete_and_exists(st):
    st.write_bytes("d/x.bin", b"123")
    assert st.exists("d/x.bin")
    info = st.head("d/x.bin")
    assert info is not None and info.size == 3
    st.delete("d/x.bin")
    assert not st.exists("d/x.bin") and st.head("d/x.bin") is None
    st.delete("d/x.bin")  # missing_ok by default
    with pytest.raises(ObjectNotFoundError):
        st.delete("d/x.bin", missing_ok=False)


def test_list_prefix_sizes_mtimes(st):
    before = time.time()
    st.write_bytes("p/a.bin", b"1")
    st.write_bytes("p/sub/b.bin", b"22")
    st.write_bytes("pq/c.bin", b"333")  # shares the string prefix "p", not the folder
    st.write_bytes("top.bin", b"4444")
    got = {o.path: o for o in st.list("p")}
    assert sorted(got) == ["p/a.bin", "p/sub/b.bin"]
    assert got["p/a.bin"].size == 1 and got["p/sub/b.bin"].size == 2
    for o in got.values():
        # object stores keep whole seconds (HTTP dates); allow clock slack between processes
        assert before - 5 <= o.mtime <= time.time() + 5
    assert [o.path for o in st.list()] == ["p/a.bin", "p/sub/b.bin", "pq/c.bin", "top.bin"]
    assert st.list("nothing-here") == []


def test_copy(st):
    st.write_bytes("src.bin", b"payload")
    assert st.copy("src.bin", "cp/dst.bin")
    assert st.read_bytes("cp/dst.bin") == b"payload"
    st.write_bytes("other.bin", b"other")
    assert not st.copy("other.bin", "cp/dst.bin", overwrite=False)
    assert st.read_bytes("cp/dst.bin") == b"payload"
    assert st.copy("other.bin", "cp/dst.bin", overwrite=True)
    assert st.read_bytes("cp/dst.bin") == b"other"
    assert st.copy("src.bin", "cp/new.bin", overwrite=False)
    assert st.read_bytes("src.bin") == b"payload"


def test_rename(st):
    st.write_bytes("m/a.json", b"A")
    assert st.rename("m/a.json", "m/b.json")
    assert not st.exists("m/a.json") and st.read_bytes("m/b.json") == b"A"
    st.write_bytes("m/c.json", b"C")
    assert not st.rename("m/c.json", "m/b.json", overwrite=False)
    assert st.read_bytes("m/c.json") == b"C" and st.read_bytes("m/b.json") == b"A"
    assert st.rename("m/c.json", "m/b.json", overwrite=True)
    assert st.read_bytes("m/b.json") == b"C" and not st.exists("m/c.json")


def test_pyarrow_fs_reads_and_writes_parquet(st):
    table = pa.table({"id": pa.array(range(100), pa.int64()), "s": pa.array([f"v{i}" for i in range(100)])})
    fs, root = st.pyarrow_fs()
    fs.create_dir(f"{root}/data", recursive=True)  # local disk needs the folder; a no-op on object stores
    pq.write_table(table, f"{root}/data/part-0.parquet", filesystem=fs)
    assert st.head("data/part-0.parquet").size > 0  # written by pyarrow, seen by Storage
    sink = pa.BufferOutputStream()
    pq.write_table(table, sink)
    st.write_bytes("data/part-1.parquet", sink.getvalue().to_pybytes())  # written by Storage, read by pyarrow
    for name in ("part-0", "part-1"):
        assert pq.read_table(f"{root}/data/{name}.parquet", filesystem=fs).equals(table)


def test_join_and_full_uri(st, store_root):
    assert Storage.join("a/", "/b", "", "c.json") == "a/b/c.json"
    assert st.full_uri("x/y") == store_root.uri.rstrip("/") + "/x/y"


def test_sees_what_delta_rs_wrote(st, store_root):
    from deltalake import DeltaTable, write_deltalake

    uri = st.full_uri("tbl")
    write_deltalake(uri, pa.table({"id": pa.array([1, 2, 3], pa.int64())}), storage_options=store_root.storage_options)
    paths = [o.path for o in st.list("tbl")]
    assert "tbl/_delta_log/00000000000000000000.json" in paths
    live = DeltaTable(uri, storage_options=store_root.storage_options).file_uris()
    assert len(live) == 1 and any(live[0].endswith(p.split("/")[-1]) for p in paths if p.endswith(".parquet"))


# ------------------------------------------------------------------ redaction and URI forms


def _assert_redacted(text: str, options: dict[str, str]) -> None:
    for v in options.values():
        if len(v) >= 8:
            assert v not in text, f"option value leaked into {text!r}"
        else:
            assert not re.search(rf"(?<![A-Za-z0-9]){re.escape(v)}(?![A-Za-z0-9])", text), text


@pytest.mark.parametrize("kind", ["s3", "azure"])
def test_errors_never_show_option_values(kind, request, caplog):
    server = request.getfixturevalue("s3_server" if kind == "s3" else "azure_server")
    opts = dict(server.storage_options)
    st = Storage.for_uri(server.uri("redact"), opts)
    with pytest.raises(ObjectNotFoundError) as e:
        st.read_bytes("missing.json")
    _assert_redacted(str(e.value), opts)
    assert e.value.__cause__ is None and e.value.__suppress_context__
    # an unreachable endpoint: the error text would carry the URL
    bad = dict(opts, max_retries="0", timeout="2s")
    if kind == "s3":
        bad["AWS_ENDPOINT_URL"] = "http://127.0.0.1:9/"
    else:
        bad["AZURE_ENDPOINT"] = "http://127.0.0.1:9/devstoreaccount1"
        bad.pop("AZURE_STORAGE_USE_EMULATOR")
    with caplog.at_level("DEBUG"):
        with pytest.raises(StorageError) as e2:
            Storage.for_uri(server.uri("redact"), bad).write_bytes("x", b"1")
    _assert_redacted(str(e2.value), bad)
    _assert_redacted(caplog.text, bad)


def test_s3a_is_s3(s3_server):
    a = Storage.for_uri(s3_server.uri("s3a-check"), s3_server.storage_options)
    a.write_bytes("f.txt", b"hello")
    b = Storage.for_uri(s3_server.uri("s3a-check").replace("s3://", "s3a://"), s3_server.storage_options)
    assert b.uri == a.uri and b.read_bytes("f.txt") == b"hello"


def test_file_uri_is_local(tmp_path):
    s = Storage.for_uri(f"file://{tmp_path}/t")
    s.write_bytes("x.txt", b"1")
    assert (tmp_path / "t" / "x.txt").read_bytes() == b"1"
    assert s.kind == "local" and s.uri == str(tmp_path / "t")


def test_unsupported_scheme():
    with pytest.raises(StorageError, match="unsupported storage URI scheme"):
        Storage.for_uri("ftp://host/x")


def test_split_options_routes_delta_rs_keys():
    config, client, retry = split_options({
        "AWS_ENDPOINT_URL": "http://e", "AWS_ALLOW_HTTP": "true", "aws_conditional_put": "etag",
        "AWS_S3_ALLOW_UNSAFE_RENAME": "true", "timeout": "10s", "max_retries": "2", "AZURE_ALLOW_HTTP": "true"})
    assert config == {"aws_endpoint_url": "http://e", "aws_conditional_put": "etag"}
    assert client == {"allow_http": "true", "timeout": "10s"}
    assert retry == {"max_retries": 2}


def test_object_version_is_opaque_and_comparable():
    assert ObjectVersion("a") == ObjectVersion("a", None) != ObjectVersion("b")
