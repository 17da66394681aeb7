"""A table's location: its URI and the storage options that reach it, held together once (as delta-rs'
``DeltaTable`` holds its location and storage options); every method of a format's interface takes one."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field


@dataclass(frozen=True)
class TableLocation:
    """A table's URI with the storage options that reach it (``str()`` gives the URI alone)."""

    #: a local path or an object-store URI (s3://, az://, gs://, ...)
    uri: str
    #: the target's storage options (delta-rs' keys); never in repr, logs or errors
    storage_options: Mapping[str, str] = field(default_factory=dict, repr=False)

    def __str__(self) -> str:
        return self.uri
