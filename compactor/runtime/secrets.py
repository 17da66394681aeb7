"""Storage option values never appear in an error message or log line.

Every ``Storage`` registers the values of its ``storage_options`` here (``register_secrets``); from then on
``redact`` replaces each of them by ``***`` in any text, ``redact_error`` in a ``CompactorError``'s message
and hint, ``error_text`` in a one-line rendering of an exception, and ``RedactingFilter`` (installed on the
log handlers by ``install_log_redaction``) in every log record. Values that cannot be secrets and would only
garble messages (booleans, small numbers) are not registered; short values are replaced only as whole words.
"""

from __future__ import annotations

import logging
import re
import threading
from collections.abc import Mapping
from typing import Any

from compactor.errors import CompactorError

_BOOLISH = {"true", "false", "1", "0", "yes", "no", "on", "off"}


class _Redactor:
    """Replaces every storage option value in a text by ``***`` (short values only as whole words)."""

    def __init__(self, values: Any) -> None:
        vals = sorted({str(v) for v in values if v is not None and str(v) != ""}, key=len, reverse=True)
        parts = [re.escape(v) if len(v) >= 8 else rf"(?<![A-Za-z0-9]){re.escape(v)}(?![A-Za-z0-9])" for v in vals]
        self._re = re.compile("|".join(parts)) if parts else None

    def __call__(self, text: str) -> str:
        return self._re.sub("***", text) if self._re is not None else text


_SECRETS: set[str] = set()
_SECRETS_LOCK = threading.Lock()
_global_redactor = _Redactor(())


def _is_plain(value: str) -> bool:
    """Values that cannot be secrets and would only garble messages if replaced: booleans, small numbers."""
    v = value.strip().lower()
    return v in _BOOLISH or (v.isdigit() and len(v) <= 4)


def register_secrets(storage_options: Mapping[str, Any] | None) -> None:
    """Remember these storage option values: ``redact`` replaces them in any text from now on."""
    global _global_redactor
    new = {str(v) for v in (storage_options or {}).values() if v is not None and str(v).strip()
           and not _is_plain(str(v))}
    with _SECRETS_LOCK:
        if new <= _SECRETS:
            return
        _SECRETS.update(new)
        _global_redactor = _Redactor(_SECRETS)


def redact(text: str) -> str:
    """``text`` with every storage option value this process has seen replaced by ``***``."""
    return _global_redactor(text) if text else text


def redact_error(e: CompactorError) -> CompactorError:
    """``e`` with storage option values redacted from its message and hint (in place; returned)."""
    e.message = redact(e.message)
    e.hint = redact(e.hint) if e.hint else e.hint
    e.args = (e.message, *e.args[1:])
    return e


_ANSI = re.compile(r"\x1b\[[0-9;]*m")


def error_text(e: BaseException | str, limit: int = 500) -> str:
    """One line from an exception's text: Rust error chains (``outer\n  ↳ cause\n   ↳ cause``, as
    the Rust storage libraries print them) joined with ``: ``, colour codes dropped, option values redacted."""
    text = _ANSI.sub("", str(e))
    parts = [ln.strip().lstrip("↳").strip() for ln in text.splitlines()]
    line = ": ".join(p for p in parts if p) or type(e).__name__
    return redact(line if len(line) <= limit else line[:limit] + "...")


class RedactingFilter(logging.Filter):
    """A logging filter that renders a record's message and redacts storage option values from it."""

    def filter(self, record: logging.LogRecord) -> bool:
        try:
            msg = record.getMessage()
        except Exception:  # noqa: BLE001 - a broken format string is logged as is
            return True
        red = redact(msg)
        if red != msg or record.args:
            record.msg, record.args = red, None
        if record.exc_info and record.exc_info[1] is not None and not record.exc_text:
            import traceback

            record.exc_text = redact("".join(traceback.format_exception(*record.exc_info)).rstrip())
        return True


def install_log_redaction(logger: logging.Logger | None = None) -> None:
    """Add ``RedactingFilter`` to every handler of ``logger`` (default: the root logger), once."""
    for h in (logger or logging.getLogger()).handlers:
        if not any(isinstance(f, RedactingFilter) for f in h.filters):
            h.addFilter(RedactingFilter())
