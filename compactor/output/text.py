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
