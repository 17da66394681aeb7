"""Measure the object-store facts in docs/notes/object-stores.md on the loopback emulators.

``python bench/objectstore_facts.py [--trials N]`` starts moto and Azurite (tests/objectstore/servers.py),
then prints, per backend (local disk, S3, Azure): median latency of the basic Storage operations,
raw obstore semantics (second create, delete of a missing object, copy without overwrite, rename), delta-rs
1.6.6 operations (write, append, optimize.compact, create_write_transaction, vacuum) and how many of two
racing create_write_transaction commits of the same version win. Everything stops at the end.
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import tempfile
import threading
import time
import uuid
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import pyarrow as pa  # noqa: E402
import pyarrow.parquet as pq  # noqa: E402

from compactor.runtime.storage import ObjectStoreStorage, Storage  # noqa: E402
from tests.objectstore.servers import start_azurite, start_s3  # noqa: E402


def median_ms(fn, n: int = 20) -> float:
    times = []
    for i in range(n):
        t = time.perf_counter()
        fn(i)
        times.append((time.perf_counter() - t) * 1000)
    return statistics.median(times)


def storage_timings(st: Storage) -> dict[str, float]:
    payload = b"x" * 1024
    st.write_bytes("bench/w.bin", payload)
    out = {
        "write 1 KiB": median_ms(lambda i: st.write_bytes(f"bench/w{i}.bin", payload)),
        "read 1 KiB": median_ms(lambda i: st.read_bytes(f"bench/w{i}.bin")),
        "head": median_ms(lambda i: st.head(f"bench/w{i}.bin")),
        "create_exclusive (new)": median_ms(lambda i: st.create_exclusive(f"bench/c{i}.bin", payload)),
        "create_exclusive (exists)": median_ms(lambda i: st.create_exclusive(f"bench/c{i}.bin", payload)),
    }
    versions = {}

    def pim(i: int) -> None:
        _, v = st.read_versioned(f"bench/w{i}.bin")
        versions[i] = st.put_if_match(f"bench/w{i}.bin", payload + b"!", v)

    out["read_versioned + put_if_match"] = median_ms(pim)
    out["list 60 objects"] = median_ms(lambda i: st.list("bench"), 10)
    out["copy"] = median_ms(lambda i: st.copy(f"bench/w{i}.bin", f"bench/cp{i}.bin"))
    out["rename"] = median_ms(lambda i: st.rename(f"bench/cp{i}.bin", f"bench/mv{i}.bin"))
    out["delete"] = median_ms(lambda i: st.delete(f"bench/mv{i}.bin"))
    fs, root = st.pyarrow_fs()
    fs.create_dir(f"{root}/bench", recursive=True)
    table = pa.table({"id": pa.array(range(10_000), pa.int64())})
    out["pyarrow write parquet 10k rows"] = median_ms(lambda i: pq.write_table(table, f"{root}/bench/p{i}.parquet",
                                                                             filesystem=fs), 5)
    out["pyarrow read parquet 10k rows"] = median_ms(lambda i: pq.read_table(f"{root}/bench/p{i}.parquet",
                                                                           filesystem=fs), 5)
    return out


def raw_semantics(st: Storage) -> dict[str, str]:
    """What obstore itself does (Storage papers over some of it)."""
    res: dict[str, str] = {}
    if not isinstance(st, ObjectStoreStorage):
        return {"note": "local disk uses plain file-system calls"}
    import obstore

    def outcome(fn) -> str:
        try:
            fn()
            return "ok"
        except BaseException as e:  # noqa: BLE001
            return type(e).__name__

    key = f"sem/{uuid.uuid4().hex}"
    obstore.put(st._store, key, b"1", mode="create")
    res["second put(mode=create)"] = outcome(lambda: obstore.put(st._store, key, b"2", mode="create"))
    res["delete missing"] = outcome(lambda: obstore.delete(st._store, key + "-missing"))
    obstore.put(st._store, key + "-b", b"b")
    res["copy(overwrite=False) onto existing"] = outcome(lambda: obstore.copy(st._store, key, key + "-b", overwrite=False))
    res["copy(overwrite=False) onto new"] = outcome(lambda: obstore.copy(st._store, key, key + "-c", overwrite=False))
    res["rename(overwrite=False) onto existing"] = outcome(lambda: obstore.rename(st._store, key, key + "-b", overwrite=False))
    res["put If-Match stale etag"] = outcome(lambda: obstore.put(st._store, key, b"3", mode={"e_tag": '"0xstale"'}))
    m = obstore.head(st._store, key)
    res["mtime resolution"] = "whole seconds" if m["last_modified"].microsecond == 0 else "sub-second"
    return res


def delta_ops(uri: str, so: dict[str, str]) -> dict[str, str]:
    from deltalake import DeltaTable, write_deltalake
    from deltalake.transaction import AddAction, CommitProperties

    res: dict[str, str] = {}

    def timed(name, fn):
        t = time.perf_counter()
        try:
            fn()
            res[name] = f"ok {1000 * (time.perf_counter() - t):.0f} ms"
        except Exception as e:  # noqa: BLE001
            res[name] = f"FAILED {type(e).__name__}: {str(e)[:80]}"

    data = [pa.table({"id": pa.array(range(i * 100, (i + 1) * 100), pa.int64())}) for i in range(5)]
    timed("write (create)", lambda: write_deltalake(uri, data[0], storage_options=so))
    for i in range(1, 5):
        timed(f"append {i}", lambda i=i: write_deltalake(uri, data[i], mode="append", storage_options=so))
    timed("optimize.compact", lambda: DeltaTable(uri, storage_options=so).optimize.compact())
    dt = DeltaTable(uri, storage_options=so)
    res["rows after compact"] = str(pq.read_table(dt.file_uris()[0], filesystem=None).num_rows
                                    if uri.startswith("/") else dt.count())
    acts = pa.table(dt.get_add_actions(flatten=True))
    path, size, rows = acts["path"][0].as_py(), acts["size_bytes"][0].as_py(), acts["num_records"][0].as_py()

    def commit(h, tag):
        h.create_write_transaction(
            actions=[AddAction(path, size, {}, int(time.time() * 1000), False, f'{{"numRecords":{rows}}}')],
            mode="append", schema=h.schema(), partition_by=[],
            commit_properties=CommitProperties(custom_metadata={"tag": tag}, max_commit_retries=0))

    timed("create_write_transaction", lambda: commit(DeltaTable(uri, storage_options=so), "single"))
    timed("vacuum(retention 0)", lambda: DeltaTable(uri, storage_options=so).vacuum(
        retention_hours=0, enforce_retention_duration=False, dry_run=False))
    return res


def commit_race(base: str, so: dict[str, str], trials: int) -> str:
    from deltalake import DeltaTable, write_deltalake
    from deltalake.transaction import AddAction, CommitProperties

    hist: dict[int, int] = {}
    for _ in range(trials):
        uri = f"{base}/race-{uuid.uuid4().hex[:8]}"
        write_deltalake(uri, pa.table({"id": pa.array([1, 2, 3], pa.int64())}), storage_options=so)
        a = pa.table(DeltaTable(uri, storage_options=so).get_add_actions(flatten=True))
        p, s = a["path"][0].as_py(), a["size_bytes"][0].as_py()
        handles = [DeltaTable(uri, storage_options=so) for _ in range(2)]
        barrier, wins = threading.Barrier(2), []

        def go(h):
            barrier.wait()
            try:
                h.create_write_transaction(
                    actions=[AddAction(p, s, {}, int(time.time() * 1000), False, '{"numRecords":3}')],
                    mode="append", schema=h.schema(), partition_by=[],
                    commit_properties=CommitProperties(max_commit_retries=0))
                wins.append(1)
            except Exception:  # noqa: BLE001 - the loser
                pass

        ts = [threading.Thread(target=go, args=(h,)) for h in handles]
        for t in ts:
            t.start()
        for t in ts:
            t.join()
        hist[len(wins)] = hist.get(len(wins), 0) + 1
    return ", ".join(f"{k} winner(s): {v}" for k, v in sorted(hist.items()))


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--trials", type=int, default=20)
    args = ap.parse_args()
    servers = []
    try:
        s3, az = start_s3(), start_azurite()
        servers += [s3, az]
        print(f"moto ready in {s3.started_in_s:.1f} s, Azurite ready in {az.started_in_s:.1f} s")
        os.environ.update({**s3.env, **az.env})
        tmp = tempfile.mkdtemp(prefix="objfacts-")
        backends = {"local": (tmp, {}), "s3": (s3.uri("facts"), s3.storage_options),
                    "azure": (az.uri("facts"), az.storage_options)}
        for name, (uri, so) in backends.items():
            st = Storage.for_uri(uri, so)
            print(f"\n## {name}")
            for k, v in storage_timings(st).items():
                print(f"  {k:34s} {v:8.2f} ms (median)")
            for k, v in raw_semantics(st).items():
                print(f"  obstore {k}: {v}")
            for k, v in delta_ops(st.full_uri(f"tbl-{uuid.uuid4().hex[:6]}"), so).items():
                print(f"  delta-rs {k}: {v}")
            print(f"  two racing create_write_transaction, {args.trials} trials: "
                  f"{commit_race(st.full_uri('races'), so, args.trials)}")
    finally:
        for s in servers:
            s.stop()


if __name__ == "__main__":
    main()
