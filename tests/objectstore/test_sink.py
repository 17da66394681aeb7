"""Structured Streaming file-sink outputs on local disk, S3 and Azure (Spark's exact layout, built without
Spark; a real streaming query on S3 is in test_spark_s3.py): read _spark_metadata, compact, replace the
latest .compact in one conditional PUT, ledger and grace-period deletion on the store, and the checks that
catch a writer that ran meanwhile."""

from __future__ import annotations

import datetime as dt
import json
import time
from dataclasses import replace

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from compactor.formats.file_sink.location import SinkRoot
from compactor.formats.file_sink.state import LEDGER, read_sink_state
from compactor.policy.model import Compaction, Sink, TablePolicy, Triggers
from compactor.runtime.paths import filesystem
from compactor.runtime.storage import Storage
from compactor.tasks.apply import apply_plan
from compactor.tasks.plan import build_plan
from tests.objectstore.helpers import journals, target

QUIET = 1  # seconds: the writer guard's quiet period in these tests


def entry_uri(root, rel: str) -> str:
    """A manifest entry as Spark writes it: s3a:// on S3, abfss://container@account... on Azure."""
    if root.backend == "local":
        from pathlib import Path

        return (Path(root.uri) / "s" / rel).as_uri()
    bucket_and_key = root.child(f"s/{rel}").split("://", 1)[1]
    if root.backend == "s3":
        return "s3a://" + bucket_and_key
    container, key = bucket_and_key.split("/", 1)
    return f"abfss://{container}@devstoreaccount1.dfs.core.windows.net/{key}"


def make_sink(root, batches: int = 7, interval: int = 3) -> str:
    """Spark's layout: one parquet file per partition per batch, log files 0..N, every ``interval``-th a
    .compact listing everything so far. Returns the sink's URI."""
    uri, so = root.child("s"), root.storage_options
    st = Storage(uri, so)
    fs, base = st.pyarrow_fs()
    listed: list[str] = []
    now = int(time.time() * 1000)
    for b in range(batches):
        new = []
        for part in (0, 1):
            rel = f"part={part}/part-{b:05d}-{part}.c000.snappy.parquet"
            fs.create_dir(f"{base}/part={part}", recursive=True)
            pq.write_table(pa.table({"id": [b * 10 + part * 5 + i for i in range(5)]}), f"{base}/{rel}", filesystem=fs)
            new.append(json.dumps({"path": entry_uri(root, rel), "size": st.head(rel).size, "isDir": False,
                                   "modificationTime": now, "blockReplication": 1, "blockSize": 1, "action": "add"}))
        listed += new
        compact = (b + 1) % interval == 0
        st.write_bytes(f"_spark_metadata/{b}.compact" if compact else f"_spark_metadata/{b}",
                       ("v1\n" + "\n".join(listed if compact else new)).encode())
    return uri


def sink_plan(uri: str, so, *, grace: int = 3600, now: dt.datetime | None = None):
    policy = TablePolicy(name="s", format="spark_file_sink", path=uri,
                         compaction=Compaction(target_file_size=64 << 20, min_file_size=32 << 20,
                                               triggers=Triggers(min_input_files=2)),
                         sink=Sink(quiet_period=QUIET, grace_period=grace, downstream_streaming_readers="none"))
    return build_plan([policy], {"s": read_sink_state(uri, so)}, now=now or dt.datetime.now(dt.UTC),
                      target=target(so), project_name="t")


def listed_ids(uri: str, so) -> list[int]:
    """Every id in the files the manifest lists (what a Spark read of the sink returns), sorted."""
    state = read_sink_state(uri, so)
    sink = SinkRoot(uri, so)
    out = []
    for raw in state.files.column("path").to_pylist():
        fs, path = filesystem(sink.location(sink.rel(raw)), so)
        out += pq.read_table(path, filesystem=fs).column("id").to_pylist()
    return sorted(out)


def log_names(uri: str, so) -> list[str]:
    return sorted(o.path for o in Storage(uri, so).list("_spark_metadata"))


def test_compact_replace_manifest_and_delete_after_grace(store_root):
    so = store_root.storage_options
    uri = make_sink(store_root)
    ids = listed_ids(uri, so)
    assert len(ids) == 70
    names = log_names(uri, so)
    from compactor.tasks.inspect import inspect_path

    report = inspect_path(uri, so)
    assert (report.kind, report.file_count, report.logs[0].latest_compact) == ("spark_file_sink", 14, "5.compact")
    time.sleep(QUIET + 1)  # the "writer" has been quiet for the quiet period (store mtimes: whole seconds)
    plan = sink_plan(uri, so)
    acts = plan.tables[0].actions
    assert [(a.type, a.input_files) for a in acts] == [("sink_compact", 6), ("sink_compact", 6)], plan.tables[0].skipped
    run = apply_plan(plan, target=target(so))
    # both succeed: compactor's own manifest PUT (a fresh mtime on a store) is not mistaken for the writer
    assert run.ok, [r.error for r in run.results]
    assert [(r.files_removed, r.files_added) for r in run.results] == [(6, 1), (6, 1)]
    assert log_names(uri, so) == names  # no new batch id, no .compact created or deleted
    state = read_sink_state(uri, so)
    assert state.extra.compact_entries == 2 and state.file_count == 4  # 5.compact: 2 new files; batch 6: 2
    new_entries = [p for p in state.files.column("path").to_pylist() if "-compactor." in p]
    prefix = {"local": "file:", "s3": "s3a://", "azure": "abfss://"}[store_root.backend]
    assert len(new_entries) == 2 and all(p.startswith(prefix) for p in new_entries)  # the writer's own form
    assert listed_ids(uri, so) == ids
    st = Storage(uri, so)
    ledger = json.loads(st.read_bytes(LEDGER))
    assert len(ledger) == 12 and not journals(uri, so)  # each rewrite closed its journal entry

    # the writer's log cleanup drops the old batch files; after the grace period the replaced files go
    for name in ("_spark_metadata/0", "_spark_metadata/1", "_spark_metadata/2.compact", "_spark_metadata/3",
                 "_spark_metadata/4"):
        st.delete(name)
    time.sleep(1.1)
    plan = sink_plan(uri, so, grace=1)
    assert [a.type for a in plan.tables[0].actions] == ["sink_delete_replaced"]
    run = apply_plan(plan, target=target(so))
    assert run.ok, [r.error for r in run.results]
    assert run.results[0].details.to_dict() == {"deleted": 12, "still_referenced": 0}
    sink = SinkRoot(uri, so)
    assert not any(st.exists(sink.rel_of_location(e["file"])) for e in ledger)
    assert json.loads(st.read_bytes(LEDGER)) == []
    assert listed_ids(uri, so) == ids
    assert sorted(o.path for o in st.list() if o.path.endswith(".parquet")) == \
        sorted(sink.rel(p) for p in read_sink_state(uri, so).files.column("path").to_pylist())


class _Writer:
    """Engine wrapper that lets "the streaming query" act while compactor rewrites."""

    def __init__(self, inner, act):
        self.inner, self.act, self.name = inner, act, inner.name

    def rewrite(self, jobs, schema, on_done=None):
        out = self.inner.rewrite(jobs, schema, on_done)
        self.act()
        return out

    def versions(self):
        return {}

    def close(self):
        pass


def test_a_batch_written_during_compaction_makes_it_stale(store_root):
    from compactor.engines.local import LocalEngine

    so = store_root.storage_options
    uri = make_sink(store_root)
    st = Storage(uri, so)
    manifest = st.read_bytes("_spark_metadata/5.compact")
    time.sleep(QUIET + 1)
    plan = sink_plan(uri, so)
    engine = _Writer(LocalEngine(so), lambda: st.write_bytes("_spark_metadata/7", b"v1\n"))
    run = apply_plan(plan, target=target(so), engine=engine)
    assert run.results[0].status == "stale" and "new batch" in run.results[0].error
    assert st.read_bytes("_spark_metadata/5.compact") == manifest  # nothing changed
    assert not [o for o in st.list() if "-compactor." in o.path or "_compactor_staging" in o.path]  # cleaned up
    assert not journals(uri, so)  # the failed rewrite's entry was recovered at once


def test_a_concurrent_change_of_the_manifest_fails_the_conditional_put(store_root, monkeypatch):
    """Between compactor's read of the latest .compact and its PUT, another process rewrites it: the PUT
    (If-Match on the version read) fails and nothing of compactor's lands."""
    if store_root.backend == "local":
        pytest.skip("local disk keeps the manifest's mtime with a rename; the conditional PUT is the stores' guard")
    from compactor.formats.file_sink import run as sink_run

    so = store_root.storage_options
    uri = make_sink(store_root)
    st = Storage(uri, so)
    time.sleep(QUIET + 1)
    plan = sink_plan(uri, so)
    # one action: a second one would legitimately compact against the other writer's manifest once the
    # quiet period has passed again (on a loaded machine it does)
    plan = replace(plan, tables=(replace(plan.tables[0], actions=plan.tables[0].actions[:1]),))
    other = st.read_bytes("_spark_metadata/5.compact") + b"\n"  # another writer's version of the manifest
    original_sink_log = sink_run.sink_log

    def sink_log_after_a_concurrent_put(sink):
        st.write_bytes("_spark_metadata/5.compact", other)
        return original_sink_log(sink)

    monkeypatch.setattr(sink_run, "sink_log", sink_log_after_a_concurrent_put)
    run = apply_plan(plan, target=target(so))
    assert run.results[0].status == "stale" and "changed by another writer" in run.results[0].error
    assert st.read_bytes("_spark_metadata/5.compact") == other  # the other writer's version stands
    assert not [o for o in st.list() if "-compactor." in o.path]
