"""Table formats behind one interface (formats/base.py). ``get_format(name)`` is the only dispatch on
a table's format; format modules are imported on first use."""

from __future__ import annotations

from importlib import import_module
from typing import TYPE_CHECKING

from compactor.errors import UsageError

if TYPE_CHECKING:  # pragma: no cover
    from compactor.formats.base import TableFormat

_FORMATS = {"delta": "compactor.formats.delta", "spark_file_sink": "compactor.formats.file_sink"}
FORMAT_NAMES = tuple(_FORMATS)


def get_format(name: str) -> TableFormat:
    module = _FORMATS.get(name)
    if module is None:
        raise UsageError(f"unknown table format {name!r} (known: {', '.join(_FORMATS)})")
    return import_module(module).FORMAT
