"""Small helpers for human-readable text: counted nouns and rich-markup-safe user text."""

from __future__ import annotations

from typing import Any

from rich.markup import escape

__all__ = ["escape", "plural", "safe"]


def plural(n: int, singular: str, plural_form: str | None = None) -> str:
    """``plural(1, "table policy", "table policies")`` -> "1 table policy"; without a plural form an
    "s" is added ("3 files")."""
    word = singular if n == 1 else (plural_form or singular + "s")
    return f"{n:,} {word}"


def safe(value: Any) -> str:
    """``str(value)`` with rich markup escaped: user and package text (table names, paths, errors,
    ``pip install 'compactor[spark]'``) must print exactly as written, never be read as markup."""
    return escape(str(value))


def speed_change(before_s: float, after_s: float) -> str:
    """How a time changed, in words a reader takes at face value: "3.2x faster", "1.8x slower" (never "0.5x
    faster"), "about the same" within 10% (a demo's timings on small files are noisy)."""
    if before_s <= 0 or after_s <= 0:
        return "not measured"
    ratio = before_s / after_s
    if 1 / 1.1 <= ratio <= 1.1:
        return "about the same"
    return f"{ratio:.1f}x faster" if ratio > 1 else f"{1 / ratio:.1f}x slower"


#: the width of output that goes to a pipe or a file (a terminal's own width is used on a terminal):
#: wide enough that table names, paths and run ids are never cut (rich would assume 80 columns)
PIPE_WIDTH = 200


def console(*, stderr: bool = False, soft_wrap: bool = False) -> Any:
    """A rich Console for compactor's output: the terminal's width on a terminal, PIPE_WIDTH otherwise
    (COLUMNS still wins when set). rich's automatic highlighting (numbers, paths, quoted strings in colour)
    is on only where colour can show: on a terminal or with FORCE_COLOR. Elsewhere it changes no
    character and its first use compiles rich's highlighting expressions: 15-20 ms of every command."""
    import os
    import sys

    from rich.console import Console

    stream = sys.stderr if stderr else sys.stdout
    tty = stream.isatty()
    width = None if tty or os.environ.get("COLUMNS") else PIPE_WIDTH
    colour = tty or bool(os.environ.get("FORCE_COLOR"))
    return Console(stderr=stderr, soft_wrap=soft_wrap, width=width, highlight=colour)
