"""The detection of a test format that mirrors another's tables (as Iceberg metadata mirrors a Delta UniForm
table's log): a folder holding ``metadata/``. Its registry entry yields to Delta (tests/formats/test_detection.py)."""

from __future__ import annotations

from compactor.models.formats import Folder


def detect(folder: Folder) -> str | None:
    return "metadata" if folder.has_folder("metadata") else None
