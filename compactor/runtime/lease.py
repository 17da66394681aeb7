"""An exclusive per-table compaction lease: ``<table>/_compactor/lease.json``.

Created atomically (O_CREAT|O_EXCL), it records owner, host, pid, run id and an expiry. A lease past its
expiry, or held by a dead process on this host, is taken over atomically: the stale file is renamed to a
unique name (only one contender's rename succeeds) and a new lease is created exclusively. Delta and
Spark ignore ``_``-prefixed directories. On object stores the same protocol needs a create-if-absent put;
compactor does not take leases there (it still re-checks before and scans after every commit).
"""

from __future__ import annotations

import json
import logging
import os
import socket
import threading
import time
import uuid
from dataclasses import dataclass
from pathlib import Path

from compactor.errors import LeaseError
from compactor.runtime.paths import is_remote as is_uri

log = logging.getLogger(__name__)

LEASE_DIR = "_compactor"
LEASE_FILE = "lease.json"


def _pid_alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


@dataclass
class LeaseInfo:
    owner: str
    host: str
    pid: int
    run_id: str
    acquired_at: float
    expires_at: float

    def is_stale(self, now: float) -> bool:
        if now >= self.expires_at:
            return True
        return self.host == socket.gethostname() and not _pid_alive(self.pid)


def _link_exclusive(path: Path, content: str) -> bool:
    """Create ``path`` with ``content`` only if it does not exist, atomically and never half-written:
    the content is written to a unique temp file first and hard-linked into place (link fails if the
    name exists). An O_EXCL create followed by a write would leave an empty file if the process were
    killed in between, blocking the table until the lease expired."""
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(f".{path.name}.{uuid.uuid4().hex}.tmp")
    with open(tmp, "w") as f:
        f.write(content)
        f.flush()
        os.fsync(f.fileno())
    try:
        os.link(tmp, path)
        return True
    except FileExistsError:
        return False
    finally:
        tmp.unlink(missing_ok=True)


class TableLease:
    """Context manager holding the lease of one table for the duration of an apply.

    ``TableLease(table_uri, owner, ttl_s)``; ``run_id`` identifies the holder (a fresh id by default).
    While held, a daemon thread renews the lease every ``ttl_s / 3`` seconds, so a long action (one
    blocking delta-rs or Spark call) keeps it; a process that dies stops renewing and the lease expires.
    """

    def __init__(self, table_uri: str, owner: str, ttl_s: float = 900.0, *, run_id: str | None = None,
                 heartbeat: bool = True) -> None:
        self.table_uri = table_uri
        self.owner, self.ttl_s = owner, float(ttl_s)
        self.run_id = run_id or uuid.uuid4().hex
        self.enabled = not is_uri(table_uri)
        self.path = Path(table_uri) / LEASE_DIR / LEASE_FILE if self.enabled else None
        self.held = False
        self._heartbeat = heartbeat
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self._lock = threading.Lock()

    def _info(self) -> LeaseInfo:
        now = time.time()
        return LeaseInfo(self.owner, socket.gethostname(), os.getpid(), self.run_id, now, now + self.ttl_s)

    def _create(self) -> bool:
        assert self.path is not None
        return _link_exclusive(self.path, json.dumps(self._info().__dict__))

    def read(self) -> LeaseInfo | None:
        assert self.path is not None
        try:
            return LeaseInfo(**json.loads(self.path.read_text()))
        except FileNotFoundError:
            return None
        except (ValueError, TypeError):
            # a torn or foreign file: treat as stale once it is older than the ttl
            age = time.time() - self.path.stat().st_mtime
            return LeaseInfo("unknown", "", 0, "", 0, 0 if age > self.ttl_s else time.time() + self.ttl_s)

    def acquire(self) -> None:
        if not self.enabled:
            log.warning("no lease on object store table %s (guarded by commit re-checks only)", self.table_uri)
            return
        for _ in range(3):
            if self._create():
                self.held = True
                self._start_heartbeat()
                return
            current = self.read()
            if current is None:
                continue
            if not current.is_stale(time.time()):
                raise LeaseError(
                    f"{self.table_uri}: compaction lease held by {current.owner} (pid {current.pid} on "
                    f"{current.host}, run {current.run_id}) until {time.strftime('%Y-%m-%dT%H:%M:%SZ', time.gmtime(current.expires_at))}",
                    hint="another compactor apply is running on this table; retry later")
            if self._take_over(current):
                self.held = True
                self._start_heartbeat()
                return
            time.sleep(0.05)
        raise LeaseError(f"{self.table_uri}: could not acquire the compaction lease (contended)")

    def _take_over(self, seen: LeaseInfo) -> bool:
        """Replace the stale lease ``seen``. Contenders serialise on an O_EXCL guard file; the holder of
        the guard re-reads the lease and replaces it only if it is still the same stale lease (a plain
        rename would let a slow contender rename away the fresh lease a faster one just created)."""
        assert self.path is not None
        guard = self.path.with_name("lease.takeover")
        if not _link_exclusive(guard, json.dumps({"host": socket.gethostname(), "pid": os.getpid()})):
            self._clear_dead_guard(guard)
            return False
        try:
            again = self.read()
            if again is not None:
                if (again.run_id, again.acquired_at) != (seen.run_id, seen.acquired_at) or \
                        not again.is_stale(time.time()):
                    return False
                stale = self.path.with_name(f"lease.stale-{uuid.uuid4().hex}.json")
                os.rename(self.path, stale)
                stale.unlink(missing_ok=True)
                log.warning("took over stale lease of %s (run %s)", seen.owner, seen.run_id)
            return self._create()
        finally:
            guard.unlink(missing_ok=True)

    @staticmethod
    def _clear_dead_guard(guard: Path) -> None:
        """A contender killed mid-takeover leaves its guard behind: remove it once its process is gone
        (same host) or it is older than 30 s."""
        try:
            age = time.time() - guard.stat().st_mtime
            owner = json.loads(guard.read_text() or "{}")
        except FileNotFoundError:
            return
        except ValueError:
            owner = {}
        dead = owner.get("host") == socket.gethostname() and not _pid_alive(int(owner.get("pid", 0)))
        if dead or age > 30:
            guard.unlink(missing_ok=True)

    def renew(self) -> None:
        """Extend the expiry (also done by the heartbeat thread). LeaseError if the lease was lost."""
        with self._lock:
            if not self.held or self.path is None:
                return
            current = self.read()
            if current is None or current.run_id != self.run_id:
                self.held = False
                raise LeaseError(f"{self.table_uri}: lease was lost (taken over after expiry?)")
            info = self._info()
            info.acquired_at = current.acquired_at
            tmp = self.path.with_name(f".lease.{self.run_id}.tmp")
            tmp.write_text(json.dumps(info.__dict__))
            os.replace(tmp, self.path)

    def check(self) -> None:
        """Raise LeaseError unless this lease is still ours (call right before committing)."""
        if not self.enabled:
            return
        current = self.read()
        if not self.held or current is None or current.run_id != self.run_id:
            raise LeaseError(f"{self.table_uri}: lease was lost (taken over after expiry?)")

    def _start_heartbeat(self) -> None:
        if not self._heartbeat:
            return
        self._stop.clear()
        self._thread = threading.Thread(target=self._beat, name=f"lease-{self.run_id[:8]}", daemon=True)
        self._thread.start()

    def _beat(self) -> None:
        while not self._stop.wait(max(self.ttl_s / 3, 0.05)):
            try:
                self.renew()
            except LeaseError as e:
                log.error("%s", e)
                return
            except OSError as e:  # a transient storage hiccup: the next beat retries before expiry
                log.warning("could not renew lease of %s: %s", self.table_uri, e)

    def release(self) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join(timeout=5)
            self._thread = None
        with self._lock:
            if not self.held or self.path is None:
                return
            current = self.read()
            if current is not None and current.run_id == self.run_id:
                self.path.unlink(missing_ok=True)
            self.held = False

    def __enter__(self) -> "TableLease":
        self.acquire()
        return self

    def __exit__(self, *exc: object) -> None:
        self.release()
