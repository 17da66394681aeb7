"""The table lease and crash recovery where processes cannot see each other (finding 3 of issue 18).

Each test runs real `compactor apply` processes on a real delta-rs table and checks, at the end, that
every row is live exactly once and that the log references no missing file."""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
from deltalake import DeltaTable

from tests.apply.helpers import exactly_once, make_table, one_table_project

REPO = Path(__file__).resolve().parents[2]


def _no_missing_file(t: Path) -> None:
    missing = [u for u in DeltaTable(str(t)).file_uris() if not Path(u).exists()]
    assert not missing, f"the log references {len(missing)} missing file(s), e.g. {missing[0]}"


def _apply(proj: Path, env: dict[str, str], prefix: tuple[str, ...] = ()) -> subprocess.Popen:
    cmd = [*prefix, sys.executable, "-m", "compactor", "apply", "--project-dir", str(proj), "--auto-approve"]
    return subprocess.Popen(cmd, cwd=REPO, env={**os.environ, "COMPACTOR_WATCH_WINDOW": "0", **env},
                            stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)


def _state(pid: int) -> str:
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return "gone"
    return stat[stat.rfind(")") + 2]


def _wait_stopped(p: subprocess.Popen, timeout: float = 60) -> None:
    deadline = time.monotonic() + timeout
    while _state(p.pid) != "T":
        assert p.poll() is None, p.communicate()[0]
        assert time.monotonic() < deadline, "the process never reached its stop point"
        time.sleep(0.05)


def _unshare_works() -> bool:
    if shutil.which("unshare") is None:
        return False
    r = subprocess.run(["unshare", "--pid", "--fork", "--mount-proc", "true"], capture_output=True)
    return r.returncode == 0


def _table(tmp_path: Path) -> tuple[Path, Path, int]:
    t = tmp_path / "lake" / "t"
    n = make_table(t, partitions=2, appends=4, rows=10)
    return t, one_table_project(tmp_path / "proj", t), n


def test_finding_3_two_pid_namespaces_sharing_a_hostname_never_take_over_a_live_lease(tmp_path: Path) -> None:
    """Docker --network host / Kubernetes hostNetwork: both runs see the same hostname, each its own pid
    1.. namespace. The first holds the lease (paused right after taking it); the second must not judge
    it dead by hostname + pid, take it over and delete the first run's outputs."""
    if not _unshare_works():
        pytest.skip("`unshare --pid --fork --mount-proc` is not permitted on this machine (needs root or user "
                    "namespaces): two PID namespaces cannot be made here")
    t, proj, n = _table(tmp_path)
    # sh is the namespace's pid 1 (init ignores SIGSTOP from inside its namespace); compactor runs as pid 2
    ns = ("unshare", "--pid", "--fork", "--mount-proc", "sh", "-c", '"$@"; exit $?', "sh")
    first = _apply(proj, {"COMPACTOR_STOP_AT": "lease.acquired"}, ns)
    deadline = time.monotonic() + 60
    while not (t / "_compactor" / "lease.json").exists():
        assert first.poll() is None and time.monotonic() < deadline, first.communicate()[0]
        time.sleep(0.05)
    inner = subprocess.run(["pgrep", "-f", "-n", f"^{sys.executable} -m compactor apply"], capture_output=True,
                           text=True)
    child = int(inner.stdout.split()[0])  # the python process inside the namespace (its host pid)
    deadline = time.monotonic() + 60
    while _state(child) != "T":
        assert time.monotonic() < deadline
        time.sleep(0.05)
    second = _apply(proj, {}, ns)
    out2 = second.communicate(timeout=120)[0]
    assert second.returncode == 1, out2
    assert "lease held by" in out2 and "took over" not in out2, out2
    os.kill(child, signal.SIGCONT)
    out1 = first.communicate(timeout=120)[0]
    assert first.returncode == 0, out1
    exactly_once(t, n)
    _no_missing_file(t)


@pytest.mark.parametrize("stop_at", ["delta.outputs_written", "delta.before_commit"])
def test_finding_3_a_holder_paused_past_its_ttl_never_commits_a_file_that_was_deleted(tmp_path: Path,
                                                                                     stop_at: str) -> None:
    """The first run is paused (SIGSTOP) after writing its outputs, before its fence (or between its
    fence and its commit), past a 2 s lease TTL; a second run takes the expired lease over, cleans up the
    first run's outputs and compacts. Resumed, the first run must abort at its fence (or find its
    outputs gone right after its commit and revert it): rows exactly once, no missing file."""
    t, proj, n = _table(tmp_path)
    ttl = {"COMPACTOR_LEASE_TTL_S": "2"}
    first = _apply(proj, {**ttl, "COMPACTOR_STOP_AT": stop_at})
    _wait_stopped(first)
    time.sleep(3)  # past the TTL: the lease and the journal's heartbeat are expired
    second = _apply(proj, ttl)
    out2 = second.communicate(timeout=120)[0]
    assert second.returncode == 0, out2
    exactly_once(t, n)
    os.kill(first.pid, signal.SIGCONT)
    out1 = first.communicate(timeout=120)[0]
    # nothing of the first run lands: its pre-commit re-check sees the second run's commit (stale), or its
    # fence sees the lease taken over, or its commit finds its outputs deleted and is reverted
    assert ("stale" in out1 and "0 succeeded" in out1) or ("lease" in out1 and first.returncode == 1) \
        or "was reverted" in out1, out1
    exactly_once(t, n)
    _no_missing_file(t)


def test_clock_skew_between_holders_does_not_let_a_live_lease_be_taken(tmp_path: Path) -> None:
    """A second host whose clock runs 10 minutes ahead (less than the 15-minute TTL) sees the first
    run's lease as live; one whose clock is 20 minutes ahead takes it over, and then the first run's
    fence, which compares the lease object's version and token and not clocks, refuses its commit."""
    t, proj, n = _table(tmp_path)
    first = _apply(proj, {"COMPACTOR_STOP_AT": "delta.outputs_written"})
    _wait_stopped(first)
    near = _apply(proj, {"COMPACTOR_CLOCK_SKEW_S": "600"})
    out = near.communicate(timeout=120)[0]
    assert near.returncode == 1 and "lease held by" in out, out
    far = _apply(proj, {"COMPACTOR_CLOCK_SKEW_S": "1200"})
    out = far.communicate(timeout=120)[0]
    assert far.returncode == 0, out
    os.kill(first.pid, signal.SIGCONT)
    out1 = first.communicate(timeout=120)[0]
    assert "0 succeeded" in out1, out1
    exactly_once(t, n)
    _no_missing_file(t)
