"""The clocks compactor's lease, journals and recovery read: one place, so that a test can move time
forward for compactor alone (the seeded fuzzer in tests/fuzz jumps past a lease's expiry instead of
sleeping through it) or give one process a skewed wall clock (lease tests).

Safety never depends on these clocks agreeing between machines: they decide when another run is
presumed gone (liveness), never whether a commit is allowed (that is the lease's conditional fence).
"""

from __future__ import annotations

import os
import time

#: seconds added to the wall clock of this process (tests: COMPACTOR_CLOCK_SKEW_S simulates a host whose
#: clock is off); ``advance`` adds to it
_offset = float(os.environ.get("COMPACTOR_CLOCK_SKEW_S") or 0.0)
_mono_offset = 0.0


def wall() -> float:
    """Seconds since the epoch, as this process's clock says (time.time() plus any offset)."""
    return time.time() + _offset


def monotonic() -> float:
    """A clock that never goes back (time.monotonic() plus any advance)."""
    return time.monotonic() + _mono_offset


def advance(seconds: float) -> None:
    """Move both clocks of this process forward by ``seconds`` (tests only)."""
    global _offset, _mono_offset
    _offset += seconds
    _mono_offset += seconds
