"""Local files written whole: the content goes to a temporary file beside the target, and one rename puts
it in place, so a reader sees the old file or the new one, never a part of either.

The temporary file's name is its writer's own (process id and a random part). Two applies of one project
writing ``run_results.json`` at the same moment each rename their own file (the last one wins) instead of
one renaming the other's temporary file away and failing after its commits had landed. A write that fails
leaves no temporary file behind and the old file as it was. For files on object stores, see storage/.
"""

from __future__ import annotations

import os
import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import IO, Any


def _temporary(path: Path) -> Path:
    return path.with_name(f".{path.name}.{os.getpid()}.{uuid.uuid4().hex[:8]}.tmp")


@contextmanager
def replacing(path: Path | str, *, binary: bool = False, fsync: bool = False) -> Iterator[IO[Any]]:
    """A file to write the new content of ``path`` into (text in UTF-8 unless ``binary``); it replaces
    ``path`` when the block ends without an error. ``fsync``: on disk before the rename."""
    path = Path(path)
    tmp = _temporary(path)
    try:
        with open(tmp, "wb" if binary else "w", encoding=None if binary else "utf-8") as f:
            yield f
            if fsync:
                f.flush()
                os.fsync(f.fileno())
        os.replace(tmp, path)
    except BaseException:
        tmp.unlink(missing_ok=True)
        raise


def replace_with(path: Path | str, content: str | bytes, *, fsync: bool = False) -> Path:
    """Write ``content`` as the whole of ``path`` (module docstring)."""
    with replacing(path, binary=isinstance(content, bytes), fsync=fsync) as f:
        f.write(content)
    return Path(path)
