"""compactor.runtime.lease on local disk, moto's S3 server and Azurite (real servers on loopback)."""

from __future__ import annotations

import json
import subprocess
import sys
import threading
import time

import pytest

from compactor.errors import LeaseError
from compactor.runtime.lease import LEASE_PATH, LeaseInfo, TableLease
from compactor.runtime.storage import Storage


def lease(root, owner: str = "t", ttl: float = 30.0, heartbeat: bool = False) -> TableLease:
    return TableLease(root.uri, owner, ttl, storage_options=root.storage_options, heartbeat=heartbeat)


def contend(leases: list[TableLease]) -> tuple[list[TableLease], list[BaseException]]:
    barrier = threading.Barrier(len(leases))
    won: list[TableLease] = []
    errors: list[BaseException] = []

    def run(lz: TableLease) -> None:
        barrier.wait()
        try:
            lz.acquire()
            won.append(lz)
        except BaseException as e:  # noqa: BLE001 - asserted by the caller
            errors.append(e)

    threads = [threading.Thread(target=run, args=(lz,)) for lz in leases]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout=120)
    return won, errors


def test_eight_contenders_exactly_one_holds(store_root):
    leases = [lease(store_root, f"w{i}") for i in range(8)]
    won, errors = contend(leases)
    assert len(won) == 1, [lz.owner for lz in won]
    assert len(errors) == 7 and all(isinstance(e, LeaseError) and "held by" in str(e) for e in errors), errors
    holder = won[0]
    holder.check()
    assert holder.read().run_id == holder.run_id
    for lz in leases:
        if lz is not holder:
            with pytest.raises(LeaseError):
                lz.check()
    holder.release()


def test_eight_contenders_take_over_one_stale_lease(store_root):
    st = Storage.for_uri(store_root.uri, store_root.storage_options)
    stale = LeaseInfo("old", "elsewhere", 1, "old-run", time.time() - 100, time.time() - 10)
    st.write_bytes(LEASE_PATH, json.dumps(stale.__dict__).encode())
    won, errors = contend([lease(store_root, f"w{i}") for i in range(8)])
    assert len(won) == 1 and len(errors) == 7, (won, errors)
    assert all(isinstance(e, LeaseError) for e in errors)
    assert won[0].read().run_id == won[0].run_id
    won[0].release()


def test_expired_lease_is_taken_over_and_old_holder_detects_it(store_root):
    a = lease(store_root, "a", ttl=1.0)
    a.acquire()
    b = lease(store_root, "b", ttl=30.0)
    with pytest.raises(LeaseError, match="held by a"):
        b.acquire()
    time.sleep(1.3)
    b.acquire()  # a expired without renewal
    assert b.read().owner == "b"
    with pytest.raises(LeaseError, match="lost"):
        a.check()
    assert not a.held
    a.release()  # must not touch b's lease
    b.check()
    assert b.read().run_id == b.run_id and not b.read().released
    b.release()


def test_renewal_keeps_the_lease(store_root):
    a = lease(store_root, "a", ttl=1.5, heartbeat=True)
    with a:
        first = a.read().expires_at
        time.sleep(3.5)  # more than twice the ttl: only the heartbeat keeps it
        b = lease(store_root, "b")
        with pytest.raises(LeaseError, match="held by a"):
            b.acquire()
        a.check()
        assert a.read().expires_at > first + 1.0
        assert a.read().acquired_at == pytest.approx(a._acquired_at)


def test_lost_lease_is_detected_by_check_renew_and_heartbeat(store_root):
    st = Storage.for_uri(store_root.uri, store_root.storage_options)
    a = lease(store_root, "a", ttl=1.2, heartbeat=True)
    a.acquire()
    intruder = LeaseInfo("intruder", "elsewhere", 1, "intruder-run", time.time(), time.time() + 600)
    st.write_bytes(LEASE_PATH, json.dumps(intruder.__dict__).encode())  # a foreign overwrite
    with pytest.raises(LeaseError, match="intruder"):
        a.check()
    with pytest.raises(LeaseError):
        a.check()  # stays lost
    a.release()
    assert a.read().owner == "intruder", "release must not clobber another holder's lease"

    c = lease(store_root, "c", ttl=0.6, heartbeat=True)
    st.delete(LEASE_PATH)
    c.acquire()
    st.write_bytes(LEASE_PATH, json.dumps(intruder.__dict__).encode())
    deadline = time.time() + 5
    while c.held and time.time() < deadline:  # the heartbeat finds out by itself
        time.sleep(0.05)
    assert not c.held and "intruder" in (c.lost_reason or "")
    c.release()


def test_dead_holder_on_this_host_is_taken_over(store_root):
    proc = subprocess.run([sys.executable, "-c", "import os; print(os.getpid())"], capture_output=True, text=True)
    dead_pid = int(proc.stdout)
    import socket

    st = Storage.for_uri(store_root.uri, store_root.storage_options)
    from compactor.runtime import liveness

    # same kernel boot and PID namespace, and no process with that pid: provably gone
    dead = LeaseInfo("dead", socket.gethostname(), dead_pid, "dead-run", time.time(), time.time() + 3600,
                     token="x", identity=liveness.identity_of(dead_pid))
    st.write_bytes(LEASE_PATH, json.dumps(dead.__dict__).encode())
    b = lease(store_root, "b")
    b.acquire()
    assert b.read().run_id == b.run_id
    b.release()


def test_release_leaves_a_tombstone_the_next_run_takes(store_root):
    with lease(store_root, "a") as a:
        a.check()
    info = a.read()
    if store_root.backend == "local":  # a conditional delete exists on disk: nothing is left behind
        assert info is None
    else:  # object stores have no conditional delete: a tombstone
        assert info.released and info.run_id == a.run_id
    with pytest.raises(LeaseError, match="not held"):
        a.check()
    with lease(store_root, "b") as b:
        assert b.read().owner == "b" and not b.read().released


def test_torn_lease_file(store_root):
    st = Storage.for_uri(store_root.uri, store_root.storage_options)
    st.write_bytes(LEASE_PATH, b'{"owner": "half')
    with pytest.raises(LeaseError, match="unknown"):
        lease(store_root, "b", ttl=30).acquire()  # young: maybe being written, wait
    b = lease(store_root, "b", ttl=0.5)
    time.sleep(1.6)  # object stores keep whole-second mtimes
    b.acquire()  # older than the ttl: stale
    assert b.read().owner == "b"
    b.release()
