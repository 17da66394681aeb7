"""What a VACUUM may delete now, by the deletion gate's own rule (formats/delta/read/references.py): one listing
of the table, judged against compactor's replay of the log. The plan lists these files for review; apply
lists them again, and deletes only those the gate still passes right before the delete."""

from __future__ import annotations

import bisect
import time
from collections.abc import Mapping
from dataclasses import dataclass

from compactor.formats.delta.read.log_replay import list_log, replay
from compactor.formats.delta.read.references import DeltaReferences
from compactor.models.table import TableLocation
from compactor.runtime.paths import is_remote, local_path
from compactor.runtime.storage import ObjectInfo, storage_for


@dataclass(frozen=True)
class VacuumListing:
    """What a VACUUM at a retention may delete now: the files (relative to the table, sorted), each with
    its size and mtime, and the gate that listed them (apply asks it again right before the delete)."""

    files: tuple[str, ...]
    objects: Mapping[str, ObjectInfo]
    gate: DeltaReferences


def vacuum_listing(table: TableLocation, retention_hours: int, *, now_ms: int | None = None) -> VacuumListing:
    """One listing of the table judged by the gate's rule at the cutoff ``now - retention``. Raises
    TableReadError when the log cannot be read with certainty."""
    storage = storage_for(table.uri, table.storage_options)
    listing = list_log(storage)
    cutoff = (int(time.time() * 1000) if now_ms is None else now_ms) - retention_hours * 3_600_000
    gate = DeltaReferences(table, replay(table, listing), cutoff, listing.commits)
    found = {o.path: o for o in files_on_storage(storage.list("")) if gate.why(o.path, int(o.mtime * 1000)) is None}
    if any(p.startswith("_change_data/") for p in found):
        gate.read_change_data(listing)
        found = {p: o for p, o in found.items() if gate.why(p) is None}
    return VacuumListing(tuple(sorted(found)), found, gate)


def vacuum_candidates(table: TableLocation, retention_hours: int) -> tuple[str, ...] | None:
    """The files a VACUUM with this retention may delete now (``vacuum_listing``); None when they cannot be
    listed (the plan then says so, and a reviewed VACUUM refuses to run)."""
    try:
        return vacuum_listing(table, retention_hours).files
    except Exception:  # noqa: BLE001 - files we cannot list are reported as unknown
        return None


def files_on_storage(objects: list[ObjectInfo]) -> list[ObjectInfo]:
    """The objects that are files: not a folder's marker. Hadoop's S3A keeps an empty object ``date=x/`` for
    each folder it made (Spark's writes), which object stores list as a file ``date=x`` beside the folder;
    no log names it, and its delete never removes the folder."""
    paths = sorted(o.path for o in objects)

    def marker(o: ObjectInfo) -> bool:
        if o.size:
            return False
        i = bisect.bisect_left(paths, o.path + "/")
        return i < len(paths) and paths[i].startswith(o.path + "/")

    return [o for o in objects if not o.path.endswith("/") and not marker(o)]


def present(files: tuple[str, ...], table: TableLocation) -> tuple[str, ...]:
    """Those of ``files`` (relative to the table) that are files on storage: one listing of each folder
    they lie in, or of the whole table where they lie in more than ``_FOLDER_LISTINGS`` folders."""
    wanted = set(files)
    store = storage_for(table.uri, table.storage_options)
    folders = sorted({f.rpartition("/")[0] for f in wanted})
    if len(folders) > _FOLDER_LISTINGS:
        objects = files_on_storage(store.list(""))
    else:
        objects, subfolders = [], set()
        for folder in folders:
            found, dirs = store.list_dir(folder)
            objects += found
            subfolders.update(dirs)
        objects = [o for o in objects if not (o.size == 0 and o.path in subfolders)]  # a folder's marker
    return tuple(sorted(o.path for o in objects if o.path in wanted))


#: folders listed one by one before ``present`` lists the whole table instead (a listing request each)
_FOLDER_LISTINGS = 16


def stored_names(names: list[str], root: str) -> dict[str, str]:
    """Each file a VACUUM names (delta-spark: by its absolute Hadoop path) relative to the table, to the
    first name it was given. A name under no form of the root stays as it is (a reviewed list, always
    relative, never holds it). On an object store a file inside the table under folders spelling the
    table's own key would be read as such a twin."""
    base = local_path(root).rstrip("/")
    if is_remote(root):
        bucket_key = base.split("://", 1)[1]
        forms = [base, bucket_key, bucket_key.partition("/")[2]]
    else:
        forms = [base, "file:" + base, "file://" + base]
    out: dict[str, str] = {}
    for name in names:
        relative = name
        for form in forms:
            if form and name.startswith(form + "/"):
                relative = name[len(form) + 1:]
                break
        out.setdefault(relative, name)
    return out
