"""What `compactor inspect` reports about a path that holds no table of a registered format: the logs of
a streaming checkpoint (formats/checkpoint.py), or an error that says what inspect reads."""

from __future__ import annotations

from collections.abc import Mapping

from compactor.errors import TableReadError
from compactor.formats.checkpoint import inspect_checkpoint
from compactor.models.inspect import ComparedSettings, InspectReport


def inspect_no_table(path: str, storage_options: Mapping[str, str], settings: ComparedSettings) -> InspectReport:
    """The report of the streaming checkpoint at ``path``; TableReadError when it is none either."""
    checkpoint = inspect_checkpoint(path, storage_options, settings)
    if checkpoint is None:
        raise TableReadError(f"{path}: not a Delta table, a file-sink output (_spark_metadata) or a streaming "
                             "checkpoint (offsets/, commits/, sources/)")
    return checkpoint
