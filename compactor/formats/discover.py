"""Which format a folder is a table of, and the tables under a root.

Each registered format detects its own tables (``FormatSpec.detect``: ``detect(folder)`` reads the
folder's entries, e.g. Delta's ``_delta_log``, a file sink's ``_spark_metadata``). Discover lists every
folder under a root once (a local directory walk, or one delimiter listing per folder on an object store)
and asks the policy's format of each listing; it never descends into a table it found, nor into a
``_``/``.`` folder (as before formats detected themselves: another format's table is listed like any
folder). ``detect_at`` detects the table at one path by asking every format (a few small requests, not a
listing of the table's files).

When several formats claim one folder (a Delta UniForm table holds Iceberg metadata beside its log): a
policy's ``format:`` decides (discover looks for the policy's format only, and a table read by a policy is
read as its format); for a bare path, a format that ``yields_to`` another claimant steps aside, and two
claims neither of which yields are an error naming both (``detect_at``).
"""

from __future__ import annotations

import fnmatch
import os
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from importlib import import_module
from pathlib import Path
from typing import TYPE_CHECKING

from compactor.errors import TableReadError
from compactor.formats import get_format
from compactor.models.formats import (
    DEFAULT_FORMAT,
    FORMATS,
    Folder,
    FolderListing,
    FormatSpec,
    format_spec,
)
from compactor.runtime.paths import is_remote, local_path
from compactor.runtime.storage import Storage, storage_for

if TYPE_CHECKING:  # pragma: no cover
    from compactor.formats.base import TableFormat

#: an object-store walk stops after listing this many folders (a prefix holding a whole data lake)
MAX_REMOTE_FOLDERS = 100_000

Detect = Callable[[Folder], str | None]


@dataclass(frozen=True)
class Claim:
    """A format that says a folder is one of its tables, and what makes it one (``"_delta_log"``)."""

    format: str
    evidence: str


@dataclass(frozen=True)
class Detected:
    """The format of the table at a path (``detect_at``), and the claims that yielded to it."""

    format: str
    evidence: str
    #: other formats that also claimed the folder and yield to this one (``FormatSpec.yields_to``)
    yielded: tuple[Claim, ...] = ()


def detector(spec: FormatSpec) -> Detect:
    """The format's ``detect`` (the module its registry entry names)."""
    fn: Detect = import_module(spec.detect).detect
    return fn


def claims(folder: Folder, specs: Sequence[FormatSpec] | None = None) -> list[Claim]:
    """Every format (of ``specs``, default: every registered one) that claims ``folder``, in registry order."""
    out: list[Claim] = []
    for spec in FORMATS if specs is None else specs:
        evidence = detector(spec)(folder)
        if evidence is not None:
            out.append(Claim(spec.name, evidence))
    return out


def resolve(where: str, found: Sequence[Claim]) -> Detected | None:
    """The one claim of ``found`` that stands once every format yielding to another claimant steps aside;
    None for no claim. Raises TableReadError naming the claimants when more than one stands."""
    if not found:
        return None
    names = {c.format for c in found}
    standing = [c for c in found if not ((spec := format_spec(c.format)) is not None
                                         and spec.yields_to & (names - {c.format}))]
    if len(standing) == 1:
        (c,) = standing
        return Detected(c.format, c.evidence, tuple(o for o in found if o is not c))
    both = " and ".join(f"a {c.format} table (it has {c.evidence})" for c in (standing or found))
    raise TableReadError(f"{where} is {both}: compactor cannot tell which format to plan it as",
                         hint="declare the table in a policy with `format:` naming the one to plan it as "
                              "(a policy's format is never guessed)")


class _Probed:
    """A single folder asked name by name (``Folder``): one small request per question on an object store,
    never a listing of the folder (a table's root may hold a million files)."""

    def __init__(self, storage: Storage) -> None:
        self.storage = storage

    def has_folder(self, name: str) -> bool:
        return self.storage.is_dir(name)

    def has_file(self, name: str) -> bool:
        return self.storage.exists(name)


def detect_at(path: str, storage_options: Mapping[str, str] | None = None) -> Detected | None:
    """The format of the table at ``path`` (a local path or an object-store URI), asking every registered
    format (module docstring); None: no format claims it. Raises TableReadError when two formats claim it
    and neither yields to the other."""
    return resolve(path, claims(_Probed(storage_for(path, storage_options))))


def claimed_by(path: str, fmt: str, storage_options: Mapping[str, str] | None = None) -> str | None:
    """What makes the folder at ``path`` a table of format ``fmt`` (its ``detect``); None: it is not one."""
    spec = format_spec(fmt)
    if spec is None:
        raise TableReadError(f"unknown table format {fmt!r}")
    return detector(spec)(_Probed(storage_for(path, storage_options)))


def format_at(path: str, storage_options: Mapping[str, str] | None = None) -> TableFormat | None:
    """The TableFormat of the table at ``path`` (``detect_at``); None: no table."""
    found = detect_at(path, storage_options)
    return None if found is None else get_format(found.format)


def discover_tables(root: str, include: Sequence[str] = ("**",), exclude: Sequence[str] = (),
                    storage_options: Mapping[str, str] | None = None, *, fmt: str = DEFAULT_FORMAT) -> list[str]:
    """Relative paths (posix) of the tables of format ``fmt`` below root, filtered by include/exclude globs.
    ``root`` may be an object-store URI (``storage_options`` reach it); a table's sub-folders are never
    listed."""
    spec = format_spec(fmt)
    if spec is None:
        raise TableReadError(f"unknown table format {fmt!r}")
    detect = detector(spec)
    if is_remote(root):
        return _discover_remote(root, include, exclude, storage_options, detect)
    base = Path(local_path(root))
    if not base.is_dir():
        raise TableReadError(f"discover root does not exist: {root}")
    found: list[str] = []
    for dirpath, dirnames, filenames in os.walk(base):
        if detect(FolderListing(frozenset(dirnames), frozenset(filenames))) is not None:
            rel = Path(dirpath).relative_to(base).as_posix()
            rel = "." if rel == "" else rel
            dirnames[:] = []  # a table's sub-directories are partitions, not tables
            if _glob_any(rel, include) and not _glob_any(rel, exclude):
                found.append(rel)
            continue
        dirnames[:] = sorted(d for d in dirnames if not d.startswith(("_", ".")))
    return sorted(found)


def _glob_any(rel: str, patterns: Sequence[str]) -> bool:
    return any(fnmatch.fnmatchcase(rel, p) or (p == "**") for p in patterns)


def _discover_remote(root: str, include: Sequence[str], exclude: Sequence[str],
                     storage_options: Mapping[str, str] | None, detect: Detect) -> list[str]:
    storage = storage_for(root, storage_options)
    found: list[str] = []
    queue = [""]
    listed = 0
    while queue:
        folder = queue.pop()
        listed += 1
        if listed > MAX_REMOTE_FOLDERS:
            raise TableReadError(f"discover under {root}: more than {MAX_REMOTE_FOLDERS} folders; narrow the root")
        objects, dirs = storage.list_dir(folder)
        if listed == 1 and not objects and not dirs:
            raise TableReadError(f"discover root does not exist (nothing under it): {root}")
        names = {d.rsplit("/", 1)[-1]: d for d in dirs}
        files = frozenset(o.path.rsplit("/", 1)[-1] for o in objects)
        if detect(FolderListing(frozenset(names), files)) is not None:
            rel = folder or "."
            if _glob_any(rel, include) and not _glob_any(rel, exclude):
                found.append(rel)
            continue  # a table's sub-folders are partitions, not tables
        queue.extend(d for n, d in sorted(names.items(), reverse=True) if not n.startswith(("_", ".")))
    return sorted(found)
