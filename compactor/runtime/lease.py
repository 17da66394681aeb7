"""An exclusive per-table compaction lease, ``<table>/_compactor/lease.json``, on any storage.

Each acquisition writes a random ``token`` and an expiry; a heartbeat renews it; ``check()`` (the fence,
called right before every side effect on the table) raises once it is lost. A lease is taken over only
when it was released, when it expired by the clock (runtime/clock.py), or when its holder is provably
gone (runtime/liveness.py: same kernel boot and PID namespace, and that process no longer runs). Never
because a hostname and a pid look dead: containers share hostnames (finding 3 of issue 18). Built on
``compactor.runtime.storage.Storage`` so it works on local disk, S3, Azure and GCS alike:

- acquire: ``create_exclusive`` (If-None-Match: * / hard link). When a lease exists, its content and
  version are read in one request; a live lease raises ``LeaseError``; a stale one is replaced with
  ``put_if_match`` against exactly the version that was read. That conditional replace is the exclusive
  guard: of several contenders that saw the same stale lease, only one replace succeeds, and a lease
  renewed or taken over in the meantime has another version, so nobody replaces a live lease.
- renew: read, check the token is ours, ``put_if_match`` a later expiry. A failed replace means another
  process changed the lease: it is lost.
- check (the fence): read the lease with its version; it must be the version this holder wrote last,
  with its token, unexpired by its own clock. A holder paused past its expiry (SIGSTOP, a VM stall)
  fails its next check and aborts, deleting only its own outputs.
- release: delete our lease where the store can do it conditionally (local disk, under a lock); elsewhere
  replace it (conditionally) with a tombstone, ``released: true``. An unconditional
  delete could remove a lease another process took over between our read and the delete (object stores
  offer no conditional delete through object_store), so the file stays and the next acquire takes the
  tombstone over with one conditional put.

Expiry compares wall clocks of different machines: they must agree to well within ``ttl_s`` (a skew
only moves when a stale lease may be taken over; the fence compares versions, not clocks).
``COMPACTOR_LEASE_TTL_S`` overrides the TTL (tests pause a holder past a short one).
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
from compactor.runtime import clock, liveness
from compactor.runtime.faults import crash_point
from compactor.runtime.storage import ObjectNotFoundError, Storage, StorageError

log = logging.getLogger(__name__)

LEASE_PATH = "_compactor/lease.json"
_ATTEMPTS = 6
DEFAULT_TTL_S = 900.0


def default_ttl_s() -> float:
    raw = os.environ.get("COMPACTOR_LEASE_TTL_S")
    try:
        return float(raw) if raw else DEFAULT_TTL_S
    except ValueError:
        return DEFAULT_TTL_S


@dataclass
class LeaseInfo:
    """The content of ``lease.json``: who holds the table's lease, and until when."""

    owner: str
    host: str
    pid: int
    run_id: str
    acquired_at: float
    expires_at: float
    released: bool = False
    #: random per acquisition: whose lease this is (never host + pid)
    token: str = ""
    #: the holder process as runtime/liveness.py can check it
    identity: str = ""

    def is_stale(self, now: float) -> bool:
        if self.released or now >= self.expires_at:
            return True
        return liveness.provably_dead(self.identity)

    def describe(self) -> str:
        until = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(self.expires_at))
        return f"{self.owner} (pid {self.pid} on {self.host}, run {self.run_id}) until {until}"


class TableLease:
    """Context manager holding the lease of one table (local path or object-store URI).

    ``TableLease(table_uri, owner, ttl_s, storage_options=...)``; a daemon thread renews it every
    ``ttl_s / 3`` seconds while held. Call ``check()`` right before committing.
    """

    def __init__(self, table_uri: str, owner: str, ttl_s: float | None = None, *,
                 storage_options: Mapping[str, Any] | None = None, storage: Storage | None = None,
                 run_id: str | None = None, heartbeat: bool = True) -> None:
        self.table_uri = table_uri
        self.storage = storage or Storage.for_uri(table_uri, storage_options)
        self.owner, self.ttl_s = owner, float(ttl_s if ttl_s is not None else default_ttl_s())
        self.run_id = run_id or uuid.uuid4().hex
        self.token = uuid.uuid4().hex
        #: the version of the lease object this holder wrote last (the fence compares it)
        self._version: Any = None
        self.held = False
        self.lost_reason: str | None = None
        self._acquired_at = 0.0
        self._heartbeat = heartbeat
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self._lock = threading.Lock()

    # ------------------------------------------------------------------ content

    def _info(self, *, released: bool = False) -> LeaseInfo:
        now = clock.wall()
        return LeaseInfo(self.owner, socket.gethostname(), os.getpid(), self.run_id,
                         self._acquired_at or now, now if released else now + self.ttl_s, released, self.token,
                         liveness.identity())

    def _write_version(self) -> None:
        """Remember the version of the lease object just written (for the fence)."""
        try:
            _, self._version = self.storage.read_versioned(LEASE_PATH)
        except ObjectNotFoundError:
            self._version = None

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
            age = clock.wall() - head.mtime if head is not None else self.ttl_s + 1
            return LeaseInfo("unknown", "", 0, "", 0, 0 if age > self.ttl_s else clock.wall() + self.ttl_s)

    def read(self) -> LeaseInfo | None:
        """The current lease record (None if there is none)."""
        try:
            return self._parse(self.storage.read_bytes(LEASE_PATH))
        except ObjectNotFoundError:
            return None

    # ------------------------------------------------------------------ acquire / renew / release

    def acquire(self) -> None:
        for attempt in range(_ATTEMPTS):
            self._acquired_at = clock.wall()
            if self.storage.create_exclusive(LEASE_PATH, self._encode(self._info())):
                self._now_held()
                return
            try:
                data, version = self.storage.read_versioned(LEASE_PATH)
            except ObjectNotFoundError:
                continue  # released and deleted by a foreign tool in between: create again
            current = self._parse(data)
            if not current.is_stale(clock.wall()):
                raise LeaseError(f"{self.table_uri}: compaction lease held by {current.describe()}",
                                 hint="another compactor apply is running on this table; retry later")
            self._acquired_at = clock.wall()
            if self.storage.put_if_match(LEASE_PATH, self._encode(self._info()), version):
                if not current.released:
                    log.warning("took over stale lease of %s (run %s)", current.owner, current.run_id)
                self._now_held()
                return
            time.sleep(random.uniform(0.01, 0.05) * (attempt + 1))  # another contender replaced it first
        raise LeaseError(f"{self.table_uri}: could not acquire the compaction lease (contended)")

    def _now_held(self) -> None:
        self.held, self.lost_reason = True, None
        self._write_version()
        self._start_heartbeat()
        crash_point("lease.acquired")

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
            if current.token != self.token or current.released:
                raise self._lost(f"now held by {current.describe()}")
            if clock.wall() >= current.expires_at:
                raise self._lost("expired before it could be renewed (the process was paused?)")
            if not self.storage.put_if_match(LEASE_PATH, self._encode(self._info()), version):
                raise self._lost("changed by another process while renewing")
            self._write_version()

    def check(self) -> None:
        """The fence: raise LeaseError unless the lease object is still the version this holder wrote,
        with its token, unexpired by this process's clock. Called right before every side effect."""
        with self._lock:
            if not self.held:
                raise LeaseError(f"{self.table_uri}: lease not held ({self.lost_reason or 'never acquired'})")
            try:
                data, version = self.storage.read_versioned(LEASE_PATH)
            except ObjectNotFoundError:
                raise self._lost("lease file deleted") from None
            current = self._parse(data)
            if current.token != self.token or current.released:
                raise self._lost(f"now held by {current.describe()}")
            if self._version is not None and version != self._version:
                raise self._lost("the lease object was replaced by another process")
            if clock.wall() >= current.expires_at:
                raise self._lost("expired without renewal (the process was paused?)")

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
            if self._parse(data).token == self.token:
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
