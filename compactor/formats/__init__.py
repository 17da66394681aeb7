"""Table formats behind one interface (formats/base.py). ``get_format(name)`` is the only dispatch on
a table's format; format modules are imported on first use."""

from __future__ import annotations

from importlib import import_module
from typing import TYPE_CHECKING

from compactor.errors import UsageError
from compactor.models.formats import FORMAT_NAMES, format_spec

if TYPE_CHECKING:  # pragma: no cover
    from compactor.formats.base import TableFormat

__all__ = ["FORMAT_NAMES", "get_format"]


def get_format(name: str) -> TableFormat:
    """The TableFormat of format ``name`` (the registry: compactor/models/formats.py)."""
    spec = format_spec(name)
    if spec is None:
        raise UsageError(f"unknown table format {name!r} (known: {', '.join(FORMAT_NAMES)})")
    fmt: TableFormat = import_module(spec.module).FORMAT
    return fmt
