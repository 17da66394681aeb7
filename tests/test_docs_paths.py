"""Docs match the code: every module, test file and schema that README.md and docs/ name exists."""

from __future__ import annotations

import re
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
_PATH = re.compile(r"(?<![\w/.-])((?:compactor|tests|schemas|bench|scripts)/[\w/.-]*\w)")


def _named(text: str) -> set[str]:
    return {m.group(1).rstrip(".") for m in _PATH.finditer(text)}


def test_every_path_the_docs_name_exists() -> None:
    docs = [REPO / "README.md", *sorted((REPO / "docs").glob("*.md"))]
    missing = []
    for doc in docs:
        for p in sorted(_named(doc.read_text())):
            if "*" in p or p.endswith("/"):
                continue
            if not (REPO / p).exists():
                missing.append(f"{doc.relative_to(REPO)}: {p}")
    assert not missing, "docs name paths that do not exist:\n" + "\n".join(missing)
