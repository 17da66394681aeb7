"""What a long phase says while it runs: a line before it starts, and another every few seconds until it ends
("starting Spark for catalog 'meta' ...", "... still starting Spark: 10s"), as dbt and Terraform print what
they are doing. The library logs them on the ``compactor.progress`` logger (it never prints); the CLI shows
that logger's lines on the terminal, whatever else it logs.

A JVM's launch points file descriptor 2 at target/spark.log (engines/spark_session.py), so the CLI writes
these lines to a duplicate of the terminal's stderr made before any JVM starts."""

from __future__ import annotations

import contextlib
import logging
import threading
import time
from collections.abc import Iterator

LOGGER = "compactor.progress"
log = logging.getLogger(LOGGER)

#: seconds between two lines of a phase that goes on
EVERY_S = 5.0


def say(message: str) -> None:
    log.info(message)


@contextlib.contextmanager
def phase(what: str, *, announce: bool = True, every_s: float = EVERY_S) -> Iterator[None]:
    """A phase of unknown length: ``what`` before it starts (``announce``; else only once it lasts
    ``every_s``), then "still <what>: Ns" every ``every_s`` seconds while it lasts, and how long it took when
    it took that long."""
    started = time.monotonic()
    done = threading.Event()
    if announce:
        say(f"{what} ...")

    def tick() -> None:
        while not done.wait(every_s):
            say(f"  still {what}: {time.monotonic() - started:.0f}s")

    ticker = threading.Thread(target=tick, name="compactor-progress", daemon=True)
    ticker.start()
    ok = False
    try:
        yield
        ok = True
    finally:
        done.set()
        ticker.join(timeout=1)
        took = time.monotonic() - started
        if took >= every_s:
            say(f"  {what}: {'done' if ok else 'failed'} after {took:.0f}s")
