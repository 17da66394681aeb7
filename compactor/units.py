"""Parse and format sizes (``512MB``, ``1GiB``, ``134217728``) and durations (``7d``, ``168h``, ``30m``)."""

from __future__ import annotations

import math
import re

#: larger sizes/durations are input mistakes (and would overflow int64 in table properties)
MAX_VALUE = 2**62

_SIZE_UNITS = {
    "": 1, "b": 1,
    "kb": 10**3, "mb": 10**6, "gb": 10**9, "tb": 10**12,
    "kib": 2**10, "mib": 2**20, "gib": 2**30, "tib": 2**40,
    "k": 2**10, "m": 2**20, "g": 2**30, "t": 2**40,
}
_DURATION_UNITS = {"s": 1, "m": 60, "h": 3600, "d": 86400, "w": 7 * 86400}

_SIZE_RE = re.compile(r"^\s*(\d+(?:\.\d+)?)\s*([a-zA-Z]*)\s*$")
_DURATION_RE = re.compile(r"^\s*(\d+(?:\.\d+)?)\s*([smhdw])\s*$")
_DURATION_PART_RE = re.compile(r"(\d+(?:\.\d+)?)\s*([smhdw])")


class UnitError(ValueError):
    """Raised by the parsers; callers turn it into a diagnostic with a location."""


def parse_size(value: object) -> int:
    """Bytes from an int or a string like ``512MB`` (decimal) or ``1GiB`` (binary)."""
    if isinstance(value, bool):
        raise UnitError(f"expected a size such as 512MB, got {value!r}")
    if isinstance(value, int):
        if value < 0 or value > MAX_VALUE:
            raise UnitError(f"size out of range: {value}")
        return value
    if not isinstance(value, str):
        raise UnitError(f"expected a size such as 512MB, got {value!r}")
    m = _SIZE_RE.match(value)
    if not m or m.group(2).lower() not in _SIZE_UNITS:
        raise UnitError(f"not a size: {value!r} (use e.g. 512MB, 1GiB or a number of bytes)")
    value_f = float(m.group(1)) * _SIZE_UNITS[m.group(2).lower()]
    if not math.isfinite(value_f) or value_f > MAX_VALUE:
        raise UnitError(f"size {value!r} is too large")
    return int(value_f)


def parse_duration(value: object) -> int:
    """Seconds from an int (seconds) or a string like ``7d``, ``168h``, ``30m``, ``1h30m``."""
    if isinstance(value, bool):
        raise UnitError(f"expected a duration such as 7d, got {value!r}")
    if isinstance(value, int):
        if value < 0 or value > MAX_VALUE:
            raise UnitError(f"duration out of range: {value}")
        return value
    if not isinstance(value, str):
        raise UnitError(f"expected a duration such as 7d, got {value!r}")
    text = value.strip().lower().replace(" ", "")
    parts = _DURATION_PART_RE.findall(text)
    if not parts or "".join(n + u for n, u in parts) != text:
        raise UnitError(f"not a duration: {value!r} (use e.g. 30m, 168h, 7d)")
    total = sum(float(n) * _DURATION_UNITS[u] for n, u in parts)
    if not math.isfinite(total) or total > MAX_VALUE:
        raise UnitError(f"duration {value!r} is too large")
    return int(total)


def format_size(n: int | float | None) -> str:
    if n is None:
        return "-"
    n = float(n)
    for unit in ("B", "KiB", "MiB", "GiB", "TiB"):
        if abs(n) < 1024 or unit == "TiB":
            return f"{n:.0f} {unit}" if unit == "B" else f"{n:.1f} {unit}"
        n /= 1024
    return f"{n:.1f} TiB"  # pragma: no cover


def format_setting_size(n: int | None) -> str:
    """A size as a policy writes it, in the unit it is a whole number of: ``64MB`` (decimal), ``128MiB``
    (binary), ``1536KiB``; the largest unit wins, binary before decimal at the same power. A size that is no
    whole number of any unit is ``format_size``'s approximation. ``parse_size`` reads every result back
    to ``n``."""
    if n is None:
        return "-"
    if n <= 0:
        return f"{n}B"
    for power, binary, decimal in ((4, "TiB", "TB"), (3, "GiB", "GB"), (2, "MiB", "MB"), (1, "KiB", "KB")):
        if n % (1024 ** power) == 0:
            return f"{n // 1024 ** power}{binary}"
        if n % (1000 ** power) == 0:
            return f"{n // 1000 ** power}{decimal}"
    return f"{n}B" if n < 1024 else format_size(n)


def format_span(seconds: int | float) -> str:
    """A length of time as read at a glance, in its two largest units: ``14s``, ``59m 46s``, ``2h 5m``,
    ``3d 4h`` (``format_duration`` writes a duration as a policy does, exactly)."""
    s = max(0, int(seconds))
    parts: list[str] = []
    for unit, size in (("d", 86400), ("h", 3600), ("m", 60), ("s", 1)):
        if s >= size or (unit == "s" and not parts):
            parts.append(f"{s // size}{unit}")
            s %= size
        if len(parts) == 2:
            break
    if len(parts) == 2 and parts[1].startswith("0"):
        parts.pop()
    return " ".join(parts)


def format_duration(seconds: int | float | None) -> str:
    if seconds is None:
        return "-"
    s = int(seconds)
    for unit, size in (("d", 86400), ("h", 3600), ("m", 60)):
        if s >= size and s % size == 0:
            return f"{s // size}{unit}"
    return f"{s}s"
