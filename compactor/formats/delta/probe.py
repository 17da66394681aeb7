"""Whether a folder is the root of a Delta table (the registry's ``FormatSpec.detect``): it holds the table's
log, ``_delta_log``. Discover asks this of every folder it lists, from that listing alone."""

from __future__ import annotations

from compactor.models.formats import Folder

LOG = "_delta_log"


def detect(folder: Folder) -> str | None:
    """``"_delta_log"`` when ``folder`` holds a Delta log; None otherwise."""
    return LOG if folder.has_folder(LOG) else None
