"""Whether a folder is the root of an Iceberg table (the registry's ``FormatSpec.detect``): it holds the
table's ``metadata/`` folder (its ``*.metadata.json`` files, manifest lists and manifests). Discover asks this
of every folder it lists, from that listing alone: the folder's own entries, never the files inside
``metadata/`` (an Iceberg table is read through its catalog; this only says what a bare path is). A Delta
UniForm table keeps such a folder beside its ``_delta_log``: the registry's entry yields to Delta there."""

from __future__ import annotations

from compactor.models.formats import Folder

METADATA = "metadata"


def detect(folder: Folder) -> str | None:
    """``"metadata/"`` when ``folder`` holds an Iceberg metadata folder; None otherwise."""
    return f"{METADATA}/" if folder.has_folder(METADATA) else None
