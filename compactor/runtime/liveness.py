"""Is the process that wrote a lease or a journal entry provably gone?

Hostname + pid proves nothing in containers: two containers started with ``--network host`` (or pods
with ``hostNetwork``) share a hostname, each has its own PID namespace, and pid 303 in one is not pid 303
in the other (finding 3 of issue 18). A process is named here by ``identity()``: the kernel's boot id,
the inode of its PID namespace, its pid and its start time (clock ticks since boot, /proc/<pid>/stat).
Another process can prove it gone only when it runs under the same kernel boot and in the same PID
namespace: then either no process has that pid or the one that has it started at another time (the pid
was reused). Anywhere else (another host, another container, no /proc) nothing is provable, and callers
fall back to time: a lease that expired, a heartbeat older than the lease's TTL.
"""

from __future__ import annotations

import functools
import os


def _read(path: str) -> str | None:
    try:
        with open(path, encoding="ascii") as f:
            return f.read().strip()
    except OSError:
        return None


def _start_ticks(pid: int) -> str | None:
    stat = _read(f"/proc/{pid}/stat")
    if stat is None:
        return None
    # the command name (field 2) may hold spaces and parentheses: fields after the last ")"
    fields = stat[stat.rfind(")") + 2:].split()
    return fields[19] if len(fields) > 19 else None


def _namespace() -> str | None:
    try:
        return os.readlink("/proc/self/ns/pid")
    except OSError:
        return None


@functools.cache
def _this_process() -> tuple[str, str, int, str] | None:
    boot, ns, start = _read("/proc/sys/kernel/random/boot_id"), _namespace(), _start_ticks(os.getpid())
    if not (boot and ns and start):
        return None
    return boot, ns, os.getpid(), start


def identity() -> str:
    """This process, as other processes can check it ("" where /proc cannot tell)."""
    me = _this_process()
    if me is None:
        return ""
    if me[2] != os.getpid():  # forked since the cache was filled
        _this_process.cache_clear()
        me = _this_process()
        if me is None:
            return ""
    return "|".join(map(str, me))


def is_me(ident: str) -> bool:
    return bool(ident) and ident == identity()


def provably_dead(ident: str) -> bool:
    """True only when the process named by ``ident`` certainly no longer runs (module docstring)."""
    me = _this_process()
    parts = ident.split("|") if ident else []
    if me is None or len(parts) != 4:
        return False
    boot, ns, pid, start = parts
    if boot != me[0] or ns != me[1] or not pid.isdigit():
        return False  # another kernel or another PID namespace: this pid means another process there
    now = _start_ticks(int(pid))
    return now is None or now != start


def identity_of(pid: int) -> str:
    """The identity of process ``pid`` in this PID namespace, as it would write it itself; for a pid
    no process has, one that is provably dead (tests build the journals and leases of other runs)."""
    me = _this_process()
    if me is None:
        return ""
    return "|".join((me[0], me[1], str(pid), _start_ticks(pid) or "0"))
