"""Named crash points: where a process may die in the middle of compactor's own I/O.

The code that writes to a table calls ``crash_point("<format>.before_commit")`` (and the like) between
its steps. Disarmed, the default, a crash point does nothing. Tests arm them to prove that a process killed at
that exact point leaves the table correct (rows exactly once, no missing file in the log, nothing of
another run deleted):

- ``set_hook(fn)``: ``fn(name)`` is called at every crash point (the seeded fuzzer in tests/fuzz snapshots
  the storage at a chosen point and stops the run there, which is what a kill leaves behind);
- ``COMPACTOR_CRASH_AT=<name>[:<n>]`` in the environment: the process SIGKILLs itself at the n-th (default
  first) time it reaches crash point ``name`` (subprocess kill tests).

``COMPACTOR_STOP_AT=<name>`` stops the process there with SIGSTOP instead (a paused process: a VM stall,
a debugger, a cgroup freeze), for lease tests that resume it later with SIGCONT.

The names in use are listed with what they mean: runtime's and the engines' in ``POINTS``, a table format's
in its own folder (``formats/<format>/faults.py``: ``CRASH_POINTS``); a test checks that every call uses
one of them.
"""

from __future__ import annotations

import os
import signal
import threading
from collections.abc import Callable

#: the crash points of runtime and the engines, and where they are (a format lists its own: module docstring)
POINTS: dict[str, str] = {
    "lease.acquired": "the table lease is held; nothing else done",
    "engine.worker_bin": "a local-engine worker process is about to rewrite its bin (in the worker, not in compactor's own process)",
}

_hook: Callable[[str], None] | None = None
_lock = threading.Lock()
_counts: dict[str, int] = {}


def set_hook(fn: Callable[[str], None] | None) -> Callable[[str], None] | None:
    """Install ``fn`` (None: disarm); returns the previous hook."""
    global _hook
    previous, _hook = _hook, fn
    return previous


def crash_point(name: str) -> None:
    hook = _hook
    if hook is not None:
        hook(name)
        return
    stop = os.environ.get("COMPACTOR_STOP_AT")
    if stop == name:  # a paused process (SIGSTOP): the test resumes it with SIGCONT
        os.kill(os.getpid(), signal.SIGSTOP)
    spec = os.environ.get("COMPACTOR_CRASH_AT")
    if not spec:
        return
    want, _, nth = spec.partition(":")
    if want != name:
        return
    with _lock:
        _counts[name] = _counts.get(name, 0) + 1
        reached = _counts[name]
    if reached >= int(nth or 1):
        os.kill(os.getpid(), signal.SIGKILL)
