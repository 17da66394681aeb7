"""A table's location: its URI and the storage options that reach it, held together once (as a table
library's table handle holds both); every method of a format's interface takes one."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field


@dataclass(frozen=True)
class TableLocation:
    """A table's URI with the storage options that reach it (``str()`` gives the URI alone)."""

    #: a local path or an object-store URI (s3://, az://, gs://, ...)
    uri: str
    #: the target's storage options (object_store's keys: runtime/storage/options.py); never in repr, logs or errors
    storage_options: Mapping[str, str] = field(default_factory=dict, repr=False)

    def __str__(self) -> str:
        return self.uri
