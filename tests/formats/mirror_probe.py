"""The detection of a test format claiming the folders Iceberg claims (a folder holding ``metadata/``), whose
registry entry does not yield to Delta: a Delta UniForm table's folder is then ambiguous
(tests/formats/test_detection.py)."""

from __future__ import annotations

from compactor.models.formats import Folder


def detect(folder: Folder) -> str | None:
    return "metadata" if folder.has_folder("metadata") else None
