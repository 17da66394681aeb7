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
import time
import uuid
from dataclasses import dataclass
from pathlib import Path

from compactor.errors import LeaseError
from compactor.state.delta import is_uri

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


class TableLease:
    """Context manager holding the lease of one table for the duration of an apply."""

    def __init__(self, table_uri: str, owner: str, run_id: str, ttl_s: float = 900.0) -> None:
        self.table_uri = table_uri
        self.owner, self.run_id, self.ttl_s = owner, run_id, ttl_s
        self.enabled = not is_uri(table_uri)
        self.path = Path(table_uri) / LEASE_DIR / LEASE_FILE if self.enabled else None
        self.held = False

    def _info(self) -> LeaseInfo:
        now = time.time()
        return LeaseInfo(self.owner, socket.gethostname(), os.getpid(), self.run_id, now, now + self.ttl_s)

    def _create(self) -> bool:
        assert self.path is not None
        self.path.parent.mkdir(parents=True, exist_ok=True)
        try:
            fd = os.open(self.path, os.O_CREAT | os.O_EXCL | os.O_WRONLY, 0o644)
        except FileExistsError:
            return False
        with os.fdopen(fd, "w") as f:
            json.dump(self._info().__dict__, f)
            f.flush()
            os.fsync(f.fileno())
        return True

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
                return
            current = self.read()
            if current is None:
                continue
            if not current.is_stale(time.time()):
                raise LeaseError(
                    f"{self.table_uri}: compaction lease held by {current.owner} (pid {current.pid} on "
                    f"{current.host}, run {current.run_id}) until {time.strftime('%Y-%m-%dT%H:%M:%SZ', time.gmtime(current.expires_at))}",
                    hint="another compactor apply is running on this table; retry later")
            # atomic takeover: whoever renames the stale lease away first may create the new one
            assert self.path is not None
            try:
                os.rename(self.path, self.path.with_name(f"lease.stale-{uuid.uuid4().hex}.json"))
                log.warning("took over stale lease of %s (run %s)", current.owner, current.run_id)
            except FileNotFoundError:
                pass
        raise LeaseError(f"{self.table_uri}: could not acquire the compaction lease (contended)")

    def renew(self) -> None:
        """Extend the expiry; call between actions of a long apply."""
        if not self.held or self.path is None:
            return
        current = self.read()
        if current is None or current.run_id != self.run_id:
            self.held = False
            raise LeaseError(f"{self.table_uri}: lease was lost (taken over after expiry?)")
        tmp = self.path.with_name(f".lease.{self.run_id}.tmp")
        tmp.write_text(json.dumps(self._info().__dict__))
        os.replace(tmp, self.path)

    def release(self) -> None:
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
