"""Delta tables on local disk, moto's S3 and Azurite: plan and apply with the local engine, the commit
reader, the crash journal and its recovery, cleanup after a failed rewrite, discover."""

from __future__ import annotations

import json
import socket
import time

import pytest
from deltalake import DeltaTable

from compactor.engines.local import LocalEngine
from compactor.errors import TableReadError
from compactor.formats import get_format
from compactor.formats.delta.read.log import commits_after, read_commit
from compactor.formats.delta.read.vacuum_listing import vacuum_candidates
from compactor.formats.discover import discover_tables
from compactor.models.table import TableLocation
from compactor.runtime.journal import JOURNAL_PREFIX, ActionJournal, JournalEntry, pending_journals
from compactor.runtime.lease import LEASE_PATH
from compactor.runtime.storage import Storage, StorageError
from compactor.tasks.apply import apply_plan
from tests.apply.helpers import listed_vacuum, one_action_plan
from tests.objectstore.helpers import exactly_once, ids, journals, make_table, plan_for, target, unreferenced


def test_plan_and_apply_compact_every_row_once(store_root):
    uri, so = store_root.child("t"), store_root.storage_options
    n = make_table(uri, so, partitions=2, appends=3)
    plan = plan_for(uri, so)
    assert [a.type for a in plan.tables[0].actions] == ["compact", "compact"]
    run = apply_plan(plan, target=target(so))
    assert run.ok, [r.error for r in run.results]
    assert [(r.files_removed, r.files_added, r.rows_before, r.rows_after) for r in run.results] == \
        [(3, 1, 60, 60), (3, 1, 60, 60)]
    exactly_once(uri, so, n)
    assert unreferenced(uri, so) == set() and journals(uri, so) == []
    if store_root.backend == "local":  # released by a conditional delete
        assert not Storage(uri, so).exists(LEASE_PATH)
    else:  # object stores have no conditional delete: released by a conditional put of a tombstone
        assert json.loads(Storage(uri, so).read_bytes(LEASE_PATH))["released"] is True
    assert len(DeltaTable(uri, storage_options=so or None).file_uris()) == 2
    assert not [a for a in plan_for(uri, so).tables[0].actions if a.type == "compact"]


def test_commit_reader(store_root):
    uri, so = store_root.child("t"), store_root.storage_options
    make_table(uri, so, partitions=1, appends=3)
    c = read_commit(TableLocation(uri, so), 1)
    assert c is not None and c.version == 1 and len(c.adds) == 1 and c.data_change
    assert read_commit(TableLocation(uri, so), 99) is None  # not written (yet): None, not an error
    assert [x.version for x in commits_after(TableLocation(uri, so), 0)] == [1, 2]


def test_commit_reader_raises_when_the_store_cannot_be_reached(s3_server):
    """A store that does not answer is an error, never "no such commit": the re-check right before a
    commit reads commits this way, and must not conclude nothing changed."""
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    dead = f"http://127.0.0.1:{s.getsockname()[1]}"
    s.close()
    so = {**s3_server.storage_options, "AWS_ENDPOINT_URL": dead, "max_retries": "0", "timeout": "2s"}
    with pytest.raises(StorageError):
        read_commit(TableLocation(s3_server.uri("nowhere"), so), 1)


def test_failed_rewrite_deletes_its_outputs_and_the_next_run_succeeds(store_root):
    uri, so = store_root.child("t"), store_root.storage_options
    n = make_table(uri, so, partitions=1, appends=4)
    written: list[str] = []

    class CrashingEngine(LocalEngine):
        def rewrite(self, jobs, schema, on_done=None):
            files = super().rewrite(jobs, schema, on_done)
            written.extend(f.location for f in files)
            raise OSError("disk full")

    version = DeltaTable(uri, storage_options=so or None).version()
    run = apply_plan(plan_for(uri, so), target=target(so), engine=CrashingEngine(so), orphan_grace_s=3600)
    assert [r.status for r in run.results] == ["error"] and "disk full" in run.results[0].error
    st = Storage(uri, so)
    assert written and not any(st.exists(w[len(uri) + 1:]) for w in written)  # deleted at once
    assert pending_journals(uri, so), "the failed action's journal entry is kept for recover()"
    assert DeltaTable(uri, storage_options=so or None).version() == version
    run = apply_plan(plan_for(uri, so), target=target(so), orphan_grace_s=0)
    assert run.ok, [r.error for r in run.results]
    assert journals(uri, so) == [] and unreferenced(uri, so) == set()
    exactly_once(uri, so, n)


def test_journal_entry_and_heartbeat_on_the_store(store_root):
    uri, so = store_root.child("t"), store_root.storage_options
    st = Storage(uri, so)
    with ActionJournal(uri, "run-1", "run-1:t:0", 3, outputs=["a/x.parquet"], storage_options=so) as j:
        first = JournalEntry(**json.loads(st.read_bytes(j.path)))
        assert first.outputs == ["a/x.parquet"] and first.read_version == 3
        time.sleep(2.5)
        later = JournalEntry(**json.loads(st.read_bytes(j.path)))
        assert later.heartbeat_at > first.heartbeat_at  # the heartbeat moved it forward
    assert not st.exists(j.path)  # deleted when the action ended normally
    with pytest.raises(RuntimeError):
        with ActionJournal(uri, "run-2", "run-2:t:0", 3, storage_options=so):
            raise RuntimeError("boom")
    kept = st.list(JOURNAL_PREFIX)
    assert len(kept) == 1 and JournalEntry(**json.loads(st.read_bytes(kept[0].path))).ended_at is not None


def _foreign_entry(st: Storage, uri: str, outputs: list[str], heartbeat_age: float, folders=(), started=None,
                   ended=None):
    """A journal entry of a run on another host (no pid check possible: only its heartbeat tells)."""
    now = time.time()
    e = JournalEntry("r", "r:t:0", uri, 0, outputs=outputs, folders=list(folders), host="other-host", pid=1, identity="",
                     started_at=started if started is not None else now - heartbeat_age - 5,
                     heartbeat_at=now - heartbeat_age, ended_at=ended)
    st.write_bytes(f"{JOURNAL_PREFIX}/r-t-0.json", json.dumps(e.__dict__).encode())


def test_recover_judges_other_hosts_by_heartbeat(store_root):
    uri, so = store_root.child("t"), store_root.storage_options
    n = make_table(uri, so, partitions=1, appends=2)
    st = Storage(uri, so)
    live = sorted(DeltaTable(uri, storage_options=so or None).get_add_actions(flatten=True).column("path").to_pylist())
    orphan = "date=2024-01-01/part-orphan-compactor.c000.snappy.parquet"
    st.copy(live[0], orphan)
    fmt = get_format("delta")
    _foreign_entry(st, uri, [orphan, live[0]], heartbeat_age=1)  # alive elsewhere: hands off
    assert fmt.recover(TableLocation(uri, so), grace_s=0) == [] and st.exists(orphan)
    # nothing about another host is provable: its run is over once its heartbeat is older than the lease
    # TTL (15 minutes), after which its lease has expired and its fence refuses any commit
    _foreign_entry(st, uri, [orphan, live[0]], heartbeat_age=600)
    assert fmt.recover(TableLocation(uri, so), grace_s=0) == [] and st.exists(orphan)
    _foreign_entry(st, uri, [orphan, live[0]], heartbeat_age=1000)
    assert fmt.recover(TableLocation(uri, so), grace_s=3600) == [orphan]
    assert not st.exists(orphan) and st.exists(live[0]) and journals(uri, so) == []
    exactly_once(uri, so, n)


def test_recover_folder_rule_on_the_store(store_root):
    """z-order (delta-rs names its own outputs): a dead run's delta-rs files in its folder, written inside
    its window, go after the grace period; committed files and files outside the window stay."""
    uri, so = store_root.child("t"), store_root.storage_options
    n = make_table(uri, so, partitions=1, appends=2)
    st = Storage(uri, so)
    live = DeltaTable(uri, storage_options=so or None).get_add_actions(flatten=True).column("path").to_pylist()
    orphan = "date=2024-01-01/part-00001-ffff-c000.zstd.parquet"
    st.copy(live[0], orphan)  # a delta-rs footer: what a killed optimize leaves
    fmt = get_format("delta")
    _foreign_entry(st, uri, [], heartbeat_age=600, folders=["date=2024-01-01"], started=time.time() - 3600 * 5)
    assert fmt.recover(TableLocation(uri, so), grace_s=0) == []  # written long after the dead run's window: not provably its
    assert st.exists(orphan)
    _foreign_entry(st, uri, [], heartbeat_age=600, folders=["date=2024-01-01"], started=time.time() - 700)
    # heartbeat 600 s ago + the store's slack: the file (written now) is outside the window too
    assert fmt.recover(TableLocation(uri, so), grace_s=0) == [] and st.exists(orphan)
    # a run that failed just now (ended_at set): its window covers the file
    _foreign_entry(st, uri, [], heartbeat_age=1, folders=["date=2024-01-01"], started=time.time() - 30,
                   ended=time.time() + 1)
    assert fmt.recover(TableLocation(uri, so), grace_s=3600) == []  # inside the window but younger than the grace period
    assert st.exists(orphan) and journals(uri, so), "kept while a candidate waits out the grace period"
    assert fmt.recover(TableLocation(uri, so), grace_s=0) == ["date=2024-01-01/part-00001-ffff-c000.zstd.parquet"]
    assert not st.exists(orphan) and journals(uri, so) == []
    exactly_once(uri, so, n)


def test_z_order_and_vacuum_on_the_store(store_root):
    import datetime as dt

    from compactor.formats.delta.read.state import read_delta_state
    from compactor.planning.actions import ZOrderAction  # noqa: F401
    from compactor.policy.model import Compaction, TablePolicy, Triggers
    from compactor.tasks.plan import build_plan

    uri, so = store_root.child("t"), store_root.storage_options
    n = make_table(uri, so, partitions=1, appends=3)
    policy = TablePolicy(name="t", path=uri, compaction=Compaction(
        strategy="z_order", z_order_by=("id",), target_file_size=2**20, min_file_size=2**19,
        triggers=Triggers(min_input_files=2)))
    plan = build_plan([policy], {"t": read_delta_state(TableLocation(uri, so))}, now=dt.datetime.now(dt.UTC),
                      target=target(so), project_name="t")
    assert [a.type for a in plan.tables[0].actions] == ["z_order"]
    run = apply_plan(plan, target=target(so))
    assert run.ok, [r.error for r in run.results]
    assert run.results[0].rows_before == run.results[0].rows_after == n
    exactly_once(uri, so, n)
    assert journals(uri, so) == []


def test_discover_lists_tables_under_a_prefix(store_root):
    so = store_root.storage_options
    for rel in ("sales/orders", "sales/returns", "ops/events/raw", "_tmp/skipped"):
        make_table(store_root.child(f"lake/{rel}"), so, partitions=2, appends=1, rows=2)
    Storage(store_root.uri, so).write_bytes("lake/ops/readme.txt", b"not a table")
    root = store_root.child("lake")
    assert discover_tables(root, storage_options=so) == ["ops/events/raw", "sales/orders", "sales/returns"]
    assert discover_tables(root, ("sales/*",), ("*/returns",), storage_options=so) == ["sales/orders"]
    assert discover_tables(store_root.child("lake/sales/orders"), storage_options=so) == ["."]
    with pytest.raises(TableReadError, match="does not exist"):
        discover_tables(store_root.child("nothing-here"), storage_options=so)


def test_a_discover_policy_expands_to_the_tables_under_a_store_prefix(store_root, tmp_path):
    from compactor.policy.model import Discover, TablePolicy
    from compactor.tasks.plan import expand_policies

    so = store_root.storage_options
    for rel in ("a", "b/c"):
        make_table(store_root.child(f"lake/{rel}"), so, partitions=1, appends=1, rows=2)
    root = store_root.child("lake")
    expanded = expand_policies([TablePolicy(name="lake", discover=Discover(root=root))], tmp_path, so)
    assert [(p.name, p.path) for p in expanded] == [("lake/a", f"{root}/a"), ("lake/b/c", f"{root}/b/c")]


def test_abfss_uris_on_azure(azure_server):
    """The ADLS Gen2 form of a URI names the same table as az://container/path."""
    so = azure_server.storage_options
    key = f"abfss-{time.time_ns()}/t"
    uri = f"abfss://{azure_server.bucket}@devstoreaccount1.dfs.core.windows.net/{key}"
    n = make_table(uri, so, partitions=1, appends=3)
    run = apply_plan(plan_for(uri, so), target=target(so))
    assert run.ok and run.results[0].files_removed == 3, [r.error for r in run.results]
    exactly_once(uri, so, n)
    exactly_once(azure_server.uri(key), so, n)  # the same table through az://
    assert journals(uri, so) == [] and unreferenced(uri, so) == set()



def test_vacuum_deletes_only_the_reviewed_files_on_the_store(store_root):
    """dry_run_first on each store: the plan's list names each file once, relative to the table, also a
    file the log removed twice (delta-rs names it once per tombstone, its delete once relative and once by
    its store path); a file removed after the plan stops the vacuum before anything is deleted."""
    uri, so = store_root.child("t"), store_root.storage_options
    n = make_table(uri, so, partitions=1, appends=3)
    DeltaTable(uri, storage_options=so or None).alter.set_table_properties(
        {"delta.deletedFileRetentionDuration": "interval 0 hours"})
    stale = DeltaTable(uri, storage_options=so or None)
    DeltaTable(uri, storage_options=so or None).optimize.compact()
    stale.optimize.compact()  # the same 3 files removed again: two tombstones each
    reviewed = one_action_plan(uri, listed_vacuum(uri, so), so)
    assert reviewed.tables[0].actions[0].files_to_delete == 3  # type: ignore[attr-defined]
    n = make_table(uri, so, partitions=1, appends=2, start=n)
    # removes the 2 appends and both compactions' outputs: 4 more, not reviewed
    DeltaTable(uri, storage_options=so or None).optimize.compact()
    run = apply_plan(reviewed, target=target(so))
    assert run.results[0].status == "error" and "would now delete 4 file(s) the reviewed plan did not list" in run.results[0].error
    again = one_action_plan(uri, listed_vacuum(uri, so), so)
    files = again.tables[0].actions[0].files  # type: ignore[attr-defined]
    assert len(files) == 7  # nothing was deleted
    run = apply_plan(again, target=target(so))
    (r,) = run.results
    assert r.status == "success", r.error
    assert r.files_removed == 7 and set(r.details.files) == set(files)
    assert vacuum_candidates(TableLocation(uri, so), 0) == ()
    assert set(ids(uri, so)) == set(range(n))  # every row still there (the stale optimize's live twice)


def test_a_folder_marker_is_no_file_to_vacuum(s3_server):
    """Hadoop's S3A keeps an empty object ``date=x/`` for each folder it made (Spark's writes, seen in
    tests/objectstore/test_spark_s3.py), which S3 lists as a file ``date=x`` beside the folder. delta-rs'
    VACUUM names it as a file no log holds, but its delete (of ``date=x``) never removes it: neither the
    plan's list nor apply's may hold it, or a vacuumed table would be planned again forever."""
    import uuid

    import boto3

    uri, so = s3_server.uri(f"marker-{uuid.uuid4().hex[:8]}"), s3_server.storage_options
    n = make_table(uri, so, partitions=1, appends=3)
    DeltaTable(uri, storage_options=so).alter.set_table_properties(
        {"delta.deletedFileRetentionDuration": "interval 0 hours"})
    DeltaTable(uri, storage_options=so).optimize.compact()
    s3 = boto3.client("s3", endpoint_url=so["AWS_ENDPOINT_URL"], region_name=so["AWS_REGION"],
                      aws_access_key_id=so["AWS_ACCESS_KEY_ID"], aws_secret_access_key=so["AWS_SECRET_ACCESS_KEY"])
    key = uri.split("://", 1)[1].partition("/")[2] + "/date=2024-01-01/"
    s3.put_object(Bucket=s3_server.bucket, Key=key, Body=b"")
    time.sleep(1.1)  # older than the zero retention by its whole-second modification time
    named = DeltaTable(uri, storage_options=so).vacuum(retention_hours=0, dry_run=True,
                                                       enforce_retention_duration=False, full=True)
    assert "date=2024-01-01" in named  # delta-rs takes the marker for a file
    files = vacuum_candidates(TableLocation(uri, so), 0)
    assert files is not None and len(files) == 3 and all(f.startswith("date=2024-01-01/") for f in files), files
    run = apply_plan(one_action_plan(uri, listed_vacuum(uri, so), so), target=target(so))
    (r,) = run.results
    assert r.status == "success" and r.files_removed == 3, r.error
    assert vacuum_candidates(TableLocation(uri, so), 0) == ()  # converged: nothing to vacuum
    assert set(ids(uri, so)) == set(range(n))


def test_folder_markers_are_no_files_in_a_whole_table_listing(s3_server):
    """Past _FOLDER_LISTINGS folders ``present`` lists the whole table once (as the vacuum listing always
    does): a marker is told from a file there too (an empty object whose name is a folder of other objects)."""
    import uuid

    import boto3

    from compactor.formats.delta.read.vacuum_listing import _FOLDER_LISTINGS, present

    uri, so = s3_server.uri(f"markers-{uuid.uuid4().hex[:8]}"), s3_server.storage_options
    s3 = boto3.client("s3", endpoint_url=so["AWS_ENDPOINT_URL"], region_name=so["AWS_REGION"],
                      aws_access_key_id=so["AWS_ACCESS_KEY_ID"], aws_secret_access_key=so["AWS_SECRET_ACCESS_KEY"])
    prefix = uri.split("://", 1)[1].partition("/")[2]
    folders = [f"p={i}" for i in range(_FOLDER_LISTINGS + 1)]
    for f in folders:
        s3.put_object(Bucket=s3_server.bucket, Key=f"{prefix}/{f}/", Body=b"")  # S3A's marker
        s3.put_object(Bucket=s3_server.bucket, Key=f"{prefix}/{f}/a.parquet", Body=b"x")
    s3.put_object(Bucket=s3_server.bucket, Key=f"{prefix}/empty", Body=b"")  # an empty file, no folder
    asked = tuple(folders) + tuple(f"{f}/a.parquet" for f in folders) + ("empty",)
    found = present(asked, TableLocation(uri, so))
    assert set(found) == {f"{f}/a.parquet" for f in folders} | {"empty"}
    # and in the listing of a folder at a time (a few folders): the markers p=0..p=2 are no files
    assert present(asked[:3] + ("p=0/a.parquet", "empty"), TableLocation(uri, so)) == ("empty", "p=0/a.parquet")
