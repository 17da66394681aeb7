"""Bins rewritten in worker processes: each bin's read, decode, encode and footer checks run without
sharing one interpreter lock (with threads, two bins on two cores ran no faster than one: measured in
docs/benchmarks.md).

Workers are forked from this process for one call and gone when it returns, so they inherit the
imported modules (no interpreter start, nothing re-imported) and exactly the arguments of the call. A
worker runs only pyarrow on local files: nothing in it touches the threads this process may have
(a table library's Rust runtime, object-store clients, the lease renewer), which a fork does not copy. Each worker
asks the kernel to kill it when the thread that forked it ends (PR_SET_PDEATHSIG): a compactor killed
mid-rewrite leaves no worker behind writing files. Ctrl-C is the parent's to handle: workers ignore it
and finish their bin, and the parent stops the call. A worker that dies (killed, out of memory) fails
the call; nothing of it is committed (the caller commits, after verifying every output).
"""

from __future__ import annotations

import ctypes
import gc
import multiprocessing
import os
import signal
import sys
from collections.abc import Callable, Sequence
from concurrent.futures import FIRST_EXCEPTION, ProcessPoolExecutor, wait
from concurrent.futures.process import BrokenProcessPool

from compactor.engines.base import BinJob, WrittenFile
from compactor.errors import ApplyError

_PR_SET_PDEATHSIG = 1


def available() -> bool:
    """Linux with fork: where a worker can be forked and tied to its parent's life."""
    return sys.platform.startswith("linux") and "fork" in multiprocessing.get_all_start_methods()


def _worker_started(parent: int) -> None:
    from compactor.runtime import faults

    # what the worker inherited is never garbage here: kept out of the collector's passes, its memory stays
    # shared with the parent (a pass writes into every object it visits, which would copy its page)
    gc.freeze()
    faults.set_hook(None)  # a crash-point hook belongs to the parent's run (its env-armed points still apply here)
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    signal.signal(signal.SIGTERM, signal.SIG_DFL)
    try:
        ctypes.CDLL(None, use_errno=True).prctl(_PR_SET_PDEATHSIG, signal.SIGKILL)
    except (OSError, AttributeError):  # no prctl: the worker still ends with the call's pool
        pass
    if os.getppid() != parent:  # the parent died before the request took effect
        os._exit(1)


def run_bins(fn: Callable[[BinJob], WrittenFile], jobs: Sequence[BinJob], width: int,
             on_done: Callable[[BinJob, WrittenFile], None] | None = None) -> list[WrittenFile]:
    """``fn(job)`` for every job in at most ``width`` forked processes; results in job order, ``on_done``
    called here as each finishes. ``fn`` must be a module-level function (it is sent by name)."""
    pool = ProcessPoolExecutor(max_workers=max(1, min(width, len(jobs))), mp_context=multiprocessing.get_context("fork"),
                               initializer=_worker_started, initargs=(os.getpid(),))
    try:
        futures = [pool.submit(fn, job) for job in jobs]
        index = {f: i for i, f in enumerate(futures)}
        out: list[WrittenFile | None] = [None] * len(jobs)
        pending = set(futures)
        while pending:
            done, pending = wait(pending, return_when=FIRST_EXCEPTION)
            for f in sorted(done, key=index.__getitem__):
                written = f.result()  # a bin's own error (unreadable input, verification) is raised as is
                out[index[f]] = written
                if on_done is not None:
                    on_done(jobs[index[f]], written)
        return [w for w in out if w is not None]
    except BrokenProcessPool:
        raise ApplyError("a rewrite worker process ended without finishing its bin (killed, or out of memory); "
                         "nothing of this group was committed") from None
    finally:
        pool.shutdown(wait=True, cancel_futures=True)
