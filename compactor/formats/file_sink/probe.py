"""Whether a folder is the output of a Spark Structured Streaming file sink (the registry's
``FormatSpec.detect``): it holds the sink's metadata log, ``_spark_metadata``. Discover asks this of every
folder it lists, from that listing alone."""

from __future__ import annotations

from compactor.models.formats import Folder

LOG = "_spark_metadata"


def detect(folder: Folder) -> str | None:
    """``"_spark_metadata"`` when ``folder`` holds a file sink's metadata log; None otherwise."""
    return LOG if folder.has_folder(LOG) else None
