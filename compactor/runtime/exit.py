"""Ending the process when a command is done: every atexit handler runs and stdout and stderr are flushed,
then the process ends without the interpreter's teardown (freeing every module's objects one by one, and
the Rust libraries' runtimes: 60-120 ms after a 2,000-file apply, measured in docs/benchmarks.md).

Only when nothing else is running: a command's own threads (rewrite pools, the lease renewer, readers)
have ended by then. If any thread that is not a daemon is still alive, the normal exit runs, which waits
for it; so it does under a profiler, tracer or debugger (cProfile writes its file when the program's
SystemExit reaches it)."""

from __future__ import annotations

import atexit
import os
import sys
import threading
from typing import NoReturn


def exit_without_teardown(done: SystemExit) -> NoReturn:
    """End the process with ``done``'s status, as ``raise done`` would, minus the teardown."""
    if sys.getprofile() is not None or sys.gettrace() is not None or any(
            t is not threading.main_thread() and t.is_alive() and not t.daemon for t in threading.enumerate()):
        raise done
    code = done.code
    if code is None:
        status = 0
    elif isinstance(code, int):
        status = code
    else:  # sys.exit("message"): Python prints it and exits 1
        print(code, file=sys.stderr)
        status = 1
    atexit._run_exitfuncs()
    for stream in (sys.stdout, sys.stderr):
        try:
            stream.flush()
        except (OSError, ValueError):  # a closed pipe or stream: what the normal exit would also not write
            pass
    os._exit(status & 0xFF)  # as the normal exit does: sys.exit(-1) ends with 255
