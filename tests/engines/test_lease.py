"""The per-table compaction lease: exclusive, atomic takeover of stale leases, heartbeat renewal."""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap
import threading
import time
from pathlib import Path

import pytest

from compactor.errors import LeaseError
from compactor.runtime.lease import TableLease


def test_lease_is_exclusive_and_released(tmp_path: Path) -> None:
    with TableLease(str(tmp_path), "a", 60) as a:
        info = json.loads((tmp_path / "_compactor" / "lease.json").read_text())
        assert info["owner"] == "a" and info["pid"] > 0 and info["expires_at"] > info["acquired_at"]
        with pytest.raises(LeaseError, match="held by a"):
            TableLease(str(tmp_path), "b", 60).acquire()
        assert a.held
    # released: deleted under a lock, only if it is still ours (object stores keep a tombstone instead)
    assert not list((tmp_path / "_compactor").iterdir())
    with TableLease(str(tmp_path), "b", 60) as b:  # released: b can take it
        assert b.held


def test_expired_lease_is_taken_over_and_old_holder_cannot_renew(tmp_path: Path) -> None:
    old = TableLease(str(tmp_path), "a", 0.01, run_id="run-a", heartbeat=False)  # a holder that stopped renewing
    old.acquire()
    time.sleep(0.05)
    new = TableLease(str(tmp_path), "b", 60, run_id="run-b")
    new.acquire()
    assert new.read().run_id == "run-b"
    old.release()  # the old holder must not delete the new lease
    assert new.read().run_id == "run-b"
    old.held = True
    with pytest.raises(LeaseError, match="lost"):
        old.renew()
    old.held = True
    with pytest.raises(LeaseError, match="lost"):
        old.check()
    new.release()


def test_lease_of_dead_process_is_taken_over(tmp_path: Path) -> None:
    subprocess.run([sys.executable, "-c", textwrap.dedent(f"""
        from compactor.runtime.lease import TableLease
        TableLease({str(tmp_path)!r}, "crashed", 3600, heartbeat=False).acquire()
    """)], check=True)
    lease = TableLease(str(tmp_path), "b", 60)
    lease.acquire()  # the holder's pid is gone: taken over despite the long ttl
    assert lease.read().owner == "b"
    lease.release()


def test_heartbeat_keeps_a_long_held_lease_alive(tmp_path: Path) -> None:
    """Without renewal a 0.3 s lease would expire during a 1 s action and be taken over."""
    with TableLease(str(tmp_path), "a", 0.3) as a:
        first = a.read().expires_at
        time.sleep(1.0)
        assert a.read().expires_at > first
        with pytest.raises(LeaseError, match="held by a"):
            TableLease(str(tmp_path), "b", 60).acquire()


def test_only_one_of_many_contenders_takes_over_a_stale_lease(tmp_path: Path) -> None:
    TableLease(str(tmp_path), "dead", 0.01, heartbeat=False).acquire()
    time.sleep(0.05)
    winners: list[str] = []
    barrier = threading.Barrier(8)

    def contend(i: int) -> None:
        lease = TableLease(str(tmp_path), f"c{i}", 60, heartbeat=False)
        barrier.wait()
        try:
            lease.acquire()
        except LeaseError:
            return
        winners.append(lease.owner)

    threads = [threading.Thread(target=contend, args=(i,)) for i in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert len(winners) == 1, winners


def test_guard_left_by_a_contender_killed_mid_takeover_does_not_block(tmp_path: Path) -> None:
    dead = subprocess.run([sys.executable, "-c", "import os; print(os.getpid())"], capture_output=True,
                          text=True, check=True)
    pid = int(dead.stdout)
    TableLease(str(tmp_path), "dead", 0.01, heartbeat=False).acquire()
    import socket

    (tmp_path / "_compactor" / "lease.takeover").write_text(json.dumps({"host": socket.gethostname(), "pid": pid}))
    time.sleep(0.05)
    with TableLease(str(tmp_path), "b", 60) as lease:
        assert lease.read().owner == "b"
