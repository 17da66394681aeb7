"""Which Iceberg bins the local engine (pyiceberg, no JVM) can rewrite and commit as an exact ``replace``, and
why not otherwise: each refusal names its reason and that the spark engine does it. The checks read the
typed state (state.py); the delete files a commit would leave stranded are read from the files themselves
(live.stranded_deletes), at rewrite time and again right before the commit (replace.py)."""

from __future__ import annotations

from collections.abc import Collection, Sequence
from typing import TYPE_CHECKING

from compactor.errors import UnsupportedTableError

if TYPE_CHECKING:
    from pyiceberg.io import FileIO

    from compactor.formats.iceberg.state import IcebergDataFile, IcebergState

#: the highest table format version pyiceberg 0.12 writes manifests for
MAX_FORMAT_VERSION = 2
SPARK = "the spark engine does this (its exact-bin rewrite commits through Iceberg's own RewriteFiles)"


class LocalEngineRefusal(UnsupportedTableError):
    """The local engine cannot rewrite or commit this bin exactly: the reason, and the spark engine."""

    code = "iceberg_local_refused"


def table_problem(state: IcebergState) -> str | None:
    """Why the local engine commits nothing to this table, or None."""
    if state.format_version > MAX_FORMAT_VERSION:
        return (f"{state.identifier} is an Iceberg format-version {state.format_version} table: pyiceberg 0.12 "
                f"cannot write its manifests (it writes format versions 1 and 2 only); {SPARK}")
    return None


def _one_partition(files: Sequence[IcebergDataFile]) -> str | None:
    keys = {f.partition_key for f in files}
    if len(keys) > 1:
        shown = sorted({f"spec {f.spec_id}: {f.partition_path or '(unpartitioned)'}" for f in files})
        return f"its files are in {len(keys)} partitions ({', '.join(shown[:4])}): a bin is one partition of one spec"
    return None


def bin_problem(state: IcebergState, paths: Sequence[str], *, move_to_current_spec: bool = False) -> str | None:
    """Why the local engine cannot rewrite the bin of ``paths`` (live data files of ``state``) exactly, or
    None. ``move_to_current_spec``: the policy lets a bin of an older partition spec be rewritten into the
    current one (pyiceberg adds files to the current spec only)."""
    problem = table_problem(state)
    if problem:
        return problem
    if not paths:
        return "the bin has no files"
    by_path = {f.path: f for f in state.files}
    missing = [p for p in paths if p not in by_path]
    if missing:
        return f"{len(missing)} of its files are not live at snapshot {state.snapshot_id}: {missing[0]}"
    files = [by_path[p] for p in paths]
    problem = _one_partition(files)
    if problem:
        return problem
    spec_id = files[0].spec_id
    if spec_id != state.default_spec_id and not move_to_current_spec:
        return (f"its files are in partition spec {spec_id}, not the table's current spec {state.default_spec_id}: "
                "pyiceberg adds files to the current spec only, and the policy keeps files in their spec; "
                f"{SPARK}")
    formats = sorted({f.file_format for f in files if f.file_format != "PARQUET"})
    if formats:
        return (f"its files include {', '.join(formats)} data files: the local engine reads and verifies Parquet "
                f"files only; {SPARK}")
    kinds = sorted({d.kind for f in files for d in f.deletes if d.kind != "position"})
    if "equality" in kinds:
        return ("equality deletes apply to its files: pyiceberg 0.12 cannot apply them (nor keep their sequence "
                f"numbers right); {SPARK}")
    if kinds:
        return f"deletion vectors apply to its files: pyiceberg 0.12 cannot commit to the v3 tables that have them; {SPARK}"
    return None


def stranded_problem(stranded: dict[str, tuple[str, ...]]) -> str | None:
    """The refusal for delete files a commit would leave live with nothing to delete (live.stranded_deletes)."""
    if not stranded:
        return None
    first, names = next(iter(stranded.items()))
    return (f"{len(stranded)} delete file(s) apply only to files this rewrite removes (e.g. {first}, for "
            f"{len(names)} of them): pyiceberg cannot remove delete files, and compactor leaves none live that only "
            f"rewritten files referenced; {SPARK}")


def check_bin(state: IcebergState, paths: Sequence[str], io: FileIO, *, move_to_current_spec: bool = False,
              removed_with: Collection[str] = ()) -> None:
    """Raise LocalEngineRefusal naming why the local engine cannot rewrite the bin of ``paths``;
    ``removed_with``: the other files the same commit removes."""
    from compactor.formats.iceberg.live import stranded_deletes

    problem = bin_problem(state, paths, move_to_current_spec=move_to_current_spec)
    if problem is None:
        problem = stranded_problem(stranded_deletes(state.live, io, {*paths, *removed_with}))
    if problem:
        raise LocalEngineRefusal(f"{state.identifier}: the local engine cannot rewrite this bin: {problem}")
