"""An exclusive per-table compaction lease, ``<table>/_compactor/lease.json``, on any storage.

The same semantics as ``compactor.engines.lease`` (owner, host, pid, run id, expiry; a heartbeat renews
it; an expired lease, a released one, or one whose holder process is dead on this host is taken over;
``check()`` raises once it is lost), built on ``compactor.runtime.storage.Storage`` so it works on local
disk, S3, Azure and GCS alike:

- acquire: ``create_exclusive`` (If-None-Match: * / hard link). When a lease exists, its content and
  version are read in one request; a live lease raises ``LeaseError``; a stale one is replaced with
  ``put_if_match`` against exactly the version that was read. That conditional replace is the exclusive
  guard: of several contenders that saw the same stale lease, only one replace succeeds, and a lease
  renewed or taken over in the meantime has another version, so nobody replaces a live lease.
- renew: read, check the run id is ours, ``put_if_match`` a later expiry. A failed replace means another
  process changed the lease: it is lost.
- release: delete our lease where the store can do it conditionally (local disk, under a lock); elsewhere
  replace it (conditionally) with a tombstone, ``released: true``. An unconditional
  delete could remove a lease another process took over between our read and the delete (object stores
  offer no conditional delete through object_store), so the file stays and the next acquire takes the
  tombstone over with one conditional put.

Expiry compares wall clocks of different machines: they must agree to well within ``ttl_s``.
"""

from __future__ import annotations

import json
import logging
import os
import random
import socket
import threading
import time
import uuid
from collections.abc import Mapping
from dataclasses import asdict, dataclass
from typing import Any

from compactor.errors import LeaseError
from compactor.runtime.storage import ObjectNotFoundError, Storage, StorageError

log = logging.getLogger(__name__)

LEASE_PATH = "_compactor/lease.json"
_ATTEMPTS = 6


def pid_alive(pid: int) -> bool:
    if pid <= 0:
        return False
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
    released: bool = False

    def is_stale(self, now: float) -> bool:
        if self.released or now >= self.expires_at:
            return True
        return self.host == socket.gethostname() and not pid_alive(self.pid)

    def describe(self) -> str:
        until = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(self.expires_at))
        return f"{self.owner} (pid {self.pid} on {self.host}, run {self.run_id}) until {until}"


class TableLease:
    """Context manager holding the lease of one table (local path or object-store URI).

    ``TableLease(table_uri, owner, ttl_s, storage_options=...)``; a daemon thread renews it every
    ``ttl_s / 3`` seconds while held. Call ``check()`` right before committing.
    """

    def __init__(self, table_uri: str, owner: str, ttl_s: float = 900.0, *,
                 storage_options: Mapping[str, Any] | None = None, storage: Storage | None = None,
                 run_id: str | None = None, heartbeat: bool = True) -> None:
        self.table_uri = table_uri
        self.storage = storage or Storage.for_uri(table_uri, storage_options)
        self.owner, self.ttl_s = owner, float(ttl_s)
        self.run_id = run_id or uuid.uuid4().hex
        self.held = False
        self.lost_reason: str | None = None
        self._acquired_at = 0.0
        self._heartbeat = heartbeat
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self._lock = threading.Lock()

    # ------------------------------------------------------------------ content

    def _info(self, *, released: bool = False) -> LeaseInfo:
        now = time.time()
        return LeaseInfo(self.owner, socket.gethostname(), os.getpid(), self.run_id,
                         self._acquired_at or now, now if released else now + self.ttl_s, released)

    @staticmethod
    def _encode(info: LeaseInfo) -> bytes:
        return json.dumps(asdict(info), sort_keys=True).encode()

    def _parse(self, data: bytes) -> LeaseInfo:
        try:
            raw = json.loads(data)
            return LeaseInfo(**{k: raw[k] for k in LeaseInfo.__dataclass_fields__ if k in raw})
        except (ValueError, TypeError, KeyError):
            # a torn or foreign file: stale once it is older than the ttl
            head = self.storage.head(LEASE_PATH)
            age = time.time() - head.mtime if head is not None else self.ttl_s + 1
            return LeaseInfo("unknown", "", 0, "", 0, 0 if age > self.ttl_s else time.time() + self.ttl_s)

    def read(self) -> LeaseInfo | None:
        """The current lease record (None if there is none)."""
        try:
            return self._parse(self.storage.read_bytes(LEASE_PATH))
        except ObjectNotFoundError:
            return None

    # ------------------------------------------------------------------ acquire / renew / release

    def acquire(self) -> None:
        for attempt in range(_ATTEMPTS):
            self._acquired_at = time.time()
            if self.storage.create_exclusive(LEASE_PATH, self._encode(self._info())):
                self._now_held()
                return
            try:
                data, version = self.storage.read_versioned(LEASE_PATH)
            except ObjectNotFoundError:
                continue  # released and deleted by a foreign tool in between: create again
            current = self._parse(data)
            if not current.is_stale(time.time()):
                raise LeaseError(f"{self.table_uri}: compaction lease held by {current.describe()}",
                                 hint="another compactor apply is running on this table; retry later")
            self._acquired_at = time.time()
            if self.storage.put_if_match(LEASE_PATH, self._encode(self._info()), version):
                if not current.released:
                    log.warning("took over stale lease of %s (run %s)", current.owner, current.run_id)
                self._now_held()
                return
            time.sleep(random.uniform(0.01, 0.05) * (attempt + 1))  # another contender replaced it first
        raise LeaseError(f"{self.table_uri}: could not acquire the compaction lease (contended)")

    def _now_held(self) -> None:
        self.held, self.lost_reason = True, None
        self._start_heartbeat()

    def _lost(self, reason: str) -> LeaseError:
        self.held, self.lost_reason = False, reason
        return LeaseError(f"{self.table_uri}: lease was lost ({reason})")

    def renew(self) -> None:
        """Extend the expiry (the heartbeat does this). LeaseError if the lease was lost."""
        with self._lock:
            if not self.held:
                return
            try:
                data, version = self.storage.read_versioned(LEASE_PATH)
            except ObjectNotFoundError:
                raise self._lost("lease file deleted") from None
            current = self._parse(data)
            if current.run_id != self.run_id or current.released:
                raise self._lost(f"now held by {current.describe()}")
            if not self.storage.put_if_match(LEASE_PATH, self._encode(self._info()), version):
                raise self._lost("changed by another process while renewing")

    def check(self) -> None:
        """Raise LeaseError unless this lease is still ours and unexpired (call right before committing)."""
        if not self.held:
            raise LeaseError(f"{self.table_uri}: lease not held ({self.lost_reason or 'never acquired'})")
        current = self.read()
        if current is None:
            raise self._lost("lease file deleted")
        if current.run_id != self.run_id or current.released:
            raise self._lost(f"now held by {current.describe()}")
        if time.time() >= current.expires_at:
            raise self._lost("expired without renewal")

    def release(self) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join(timeout=10)
            self._thread = None
        with self._lock:
            if not self.held:
                return
            self.held = False
            try:
                data, version = self.storage.read_versioned(LEASE_PATH)
            except ObjectNotFoundError:
                return
            if self._parse(data).run_id == self.run_id:
                # deleted where the store can do it conditionally (local disk); a tombstone elsewhere
                if self.storage.delete_if_match(LEASE_PATH, version) is None:
                    self.storage.put_if_match(LEASE_PATH, self._encode(self._info(released=True)), version)

    # ------------------------------------------------------------------ heartbeat

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
            except StorageError as e:  # a transient storage error: the next beat retries before expiry
                log.warning("could not renew the lease of %s: %s", self.table_uri, e)

    def __enter__(self) -> TableLease:
        self.acquire()
        return self

    def __exit__(self, *exc: object) -> None:
        self.release()
