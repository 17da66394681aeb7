"""The rows a rewrite leaves out of each input: those its deletion vector deletes (Delta's row-level
deletes), proved before a single file is written, and handed to the engine as the format-neutral core's
per-input deletes (engines/base.py BinInput.drop). Each input's descriptor is kept as its add carries it,
for the remove that retires the file (formats/delta/apply/log_writer.py remove_action).

The log says which file has which vector (formats/delta/read/log_replay.py, never a list another library
computed), the vector is decoded from its bytes (formats/delta/read/deletion_vectors.py), and every
number is checked against a second source before rows are dropped by it:
- the positions decoded equal the descriptor's ``cardinality``, and each lies below the file's row count
  (the log's numRecords; the engine then checks the footer: a position past the end fails verification);
- where delta-rs can read the table's vectors (it cannot resolve some, e.g. a random prefix), its mask
  of the file deletes exactly the same positions and is as long as the file's row count;
- the number of rows the plan's state counted as deleted (delta-rs, at plan time) is the cardinality.
Any disagreement refuses the group, naming the file and why; nothing is written."""

from __future__ import annotations

import logging
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace
from typing import Any

from compactor.engines.base import RewriteEngine
from compactor.errors import CompactorError, StalePlanError, UnsupportedTableError, VerificationError
from compactor.formats.base import ActionContext
from compactor.formats.delta.apply.commit import RemovedFile, removed_since
from compactor.formats.delta.apply.context import handle, planned_inputs, refuse_unrewritable
from compactor.formats.delta.apply.log_writer import writes_directly
from compactor.formats.delta.apply.session import session_of
from compactor.formats.delta.read.deletion_vectors import (
    DeletionVector,
    DeletionVectorError,
    DescriptorJson,
    deleted_positions,
)
from compactor.formats.delta.read.facts import delta_facts
from compactor.formats.delta.read.log import read_commit
from compactor.formats.delta.read.log_replay import Replay, replay
from compactor.models.state import TableState
from compactor.models.table import TableLocation
from compactor.planning.actions import Action
from compactor.runtime.storage import storage_for

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class InputDeletes:
    """One input's deletion vector as its add carries it, and the positions it deletes."""

    vector: DeletionVector
    positions: frozenset[int]
    #: the add's tags and statistics, where the log's replay read the whole add (a remove copies them)
    tags: Mapping[str, str] | None = None
    stats: str | None = None


@dataclass(frozen=True)
class ProvedDeletes:
    """What input_deletes found: the vectors that proved themselves, and why each other input is refused."""

    deletes: Mapping[str, InputDeletes]
    refused: Mapping[str, VerificationError]


def input_deletes(where: TableLocation, state: TableState, inputs: Sequence[RemovedFile],
                  dt: Any = None, logged: Replay | None = None) -> ProvedDeletes:
    """The deletion vector of each of ``inputs`` that has one (module docstring); none when the table has
    no deletionVectors feature. ``dt``: the open DeltaTable, for the cross-check with delta-rs' masks.
    ``logged``: the log's replay at its newest version (read here when not given).
    Raises StalePlanError when an input is no longer live."""
    facts = delta_facts(state)
    if not facts.deletion_vectors_enabled or not inputs:
        return ProvedDeletes({}, {})
    logged = logged if logged is not None else replay(where)
    live = {key[0] for key in logged.live}
    gone = [f.path for f in inputs if f.path not in live]
    if gone:
        raise StalePlanError(f"{len(gone)} input file(s) are no longer in the table (e.g. {gone[0]}); nothing was "
                             "written or committed", hint="re-plan")
    store = storage_for(where.uri, where.storage_options)
    masks = _delta_rs_masks(dt, where.uri) if dt is not None else None
    counted = facts.deleted_rows
    out: dict[str, InputDeletes] = {}
    refused: dict[str, VerificationError] = {}
    adds = _logged_adds(where, logged, [f.path for f in inputs if f.path in logged.deletion_vectors])
    for f in inputs:
        try:
            found = _proved(f, logged.deletion_vectors.get(f.path), store, where.uri, counted, masks)
        except VerificationError as e:
            refused[f.path] = e
            continue
        if found is not None:
            add = adds.get(f.path) or {}
            tags, stats = add.get("tags"), add.get("stats")
            out[f.path] = replace(found, tags={str(k): str(v) for k, v in tags.items()} if isinstance(tags, Mapping)
                                  else None, stats=stats if isinstance(stats, str) else None)
    return ProvedDeletes(out, refused)


def _logged_adds(where: TableLocation, logged: Replay, paths: Sequence[str]) -> dict[str, Mapping[str, Any]]:
    """The live add of each of ``paths`` (files with a deletion vector) as a JSON commit since the replay's
    checkpoint has it, whole (a remove copies its tags and statistics); a file added before the checkpoint
    is absent (the checkpoint's adds are read for their descriptors only)."""
    wanted = {p: logged.deletion_vectors[p] for p in paths}
    out: dict[str, Mapping[str, Any]] = {}
    version = logged.version
    while wanted and version > (logged.checkpoint_version if logged.checkpoint_version is not None else -1):
        commit = read_commit(where, version)
        if commit is None:
            break
        for p in [p for p in wanted if p in commit.adds]:
            add = commit.adds[p]
            if add.get("deletionVector") == wanted[p]:
                out[p] = add
            del wanted[p]  # its newest add: an older one is not the live one
        version -= 1
    return out


def _proved(f: RemovedFile, raw: DescriptorJson | None, store: Any, root: str, counted: Mapping[str, int] | None,
            masks: Mapping[str, list[bool]] | None) -> InputDeletes | None:
    """``f``'s deletion vector (descriptor ``raw``, as the log has it) proved, or None when it has none."""
    if raw is None:
        if counted and counted.get(f.path):
            raise _refused(f.path, f"delta-rs counts {counted[f.path]} deleted row(s), the log names no deletion vector")
        return None
    dv = DeletionVector(raw)
    try:
        positions = deleted_positions(dv, store.read_bytes, root)
    except DeletionVectorError as e:
        raise _refused(f.path, str(e)) from None
    rows = f.num_records
    if rows is not None and positions and positions[-1] >= rows:
        raise _refused(f.path, f"it deletes row {positions[-1]}, the file holds {rows}")
    if counted is not None and f.path in counted and counted[f.path] != dv.cardinality:
        raise _refused(f.path, f"the plan's state counted {counted[f.path]} deleted row(s), its cardinality says "
                               f"{dv.cardinality}")
    mask = None if masks is None else masks.get(f.path)
    if mask is not None:
        theirs = [i for i, keep in enumerate(mask) if not keep]
        if theirs != positions:
            raise _refused(f.path, f"delta-rs' mask deletes {len(theirs)} row(s), the vector {len(positions)} (or "
                                   "other positions)")
        if rows is not None and len(mask) != rows:
            raise _refused(f.path, f"delta-rs' mask covers {len(mask)} row(s), the file holds {rows}")
    return InputDeletes(dv, frozenset(positions))


@dataclass(frozen=True)
class GroupInputs:
    """A group's inputs as they are now: per action, its files (each with its deletion vector descriptor,
    for its remove); the rows each input's deletion vector deletes; the members refused, by index: stale (a
    commit since the plan removed an input, e.g. a DELETE that gave it a new vector) or a vector of theirs
    does not prove itself."""

    files: list[dict[str, RemovedFile]]
    drops: dict[str, frozenset[int]]
    refused: dict[int, CompactorError]


def group_inputs(ctx: ActionContext, actions: Sequence[Action], engine: RewriteEngine) -> GroupInputs:
    """The group's inputs (GroupInputs); refuses what compactor's rewrite cannot do
    (context.refuse_unrewritable)."""

    session = session_of(ctx)
    inputs = [planned_inputs(ctx.state, a, session) for a in actions]
    for i in inputs:
        refuse_unrewritable(ctx, i, engine)
    if delta_facts(ctx.state).unremovable_paths.intersection(p for i in inputs for p in i):
        spellings = session.replayed().spellings  # each remove spelled as the log spelled its add
        inputs = [{p: replace(f, spelled=spellings.get(p)) for p, f in i.items()} for i in inputs]
    every = [f for i in inputs for f in i.values()]
    if not delta_facts(ctx.state).deletion_vectors_enabled:
        return GroupInputs(inputs, {}, {})
    gone = removed_since(ctx.location, int(ctx.state.version or 0), [f.path for f in every])
    refused: dict[int, CompactorError] = {k: _stale(sorted(i.keys() & gone), gone)
                                          for k, i in enumerate(inputs) if i.keys() & gone}
    dt = handle(ctx)
    proved = input_deletes(ctx.location, ctx.state, [f for f in every if f.path not in gone], dt, session.replayed())
    refused.update({k: next(proved.refused[p] for p in i if p in proved.refused)
                    for k, i in enumerate(inputs) if k not in refused and proved.refused.keys() & i.keys()})
    deletes = proved.deletes
    if deletes and not writes_directly(dt, ctx.location):
        raise UnsupportedTableError(f"{ctx.table.name}: {len(deletes)} planned file(s) carry deletion vectors (e.g. "
                                    f"{sorted(deletes)[0]}), and compactor cannot write this table's commits itself "
                                    "(a writer feature it does not know, or a locking store); delta-rs' remove cannot "
                                    "carry a deletion vector", hint="compact them with the spark engine's native OPTIMIZE")
    return GroupInputs([carrying(i, deletes) for i in inputs], {p: d.positions for p, d in deletes.items()}, refused)


def _stale(paths: list[str], gone: Mapping[str, int]) -> StalePlanError:
    return StalePlanError(f"{len(paths)} input file(s) were removed by a concurrent commit (e.g. {paths[0]} in version "
                          f"{gone[paths[0]]}); nothing of this partition was written or committed", hint="re-plan")


def carrying(files: Mapping[str, RemovedFile], deletes: Mapping[str, InputDeletes]) -> dict[str, RemovedFile]:
    """``files`` with each one's deletion vector descriptor, for its remove."""
    return {p: replace(f, deletion_vector=deletes[p].vector.raw, tags=deletes[p].tags, stats=deletes[p].stats)
            if p in deletes else f for p, f in files.items()}


def _delta_rs_masks(dt: Any, uri: str) -> dict[str, list[bool]] | None:
    """delta-rs' keep-mask of each file with a deletion vector, by path relative to the root; None when
    delta-rs cannot read them (the decoded vectors then stand on their own checks)."""
    import pyarrow as pa

    try:
        table = pa.table(dt.deletion_vectors())
    except Exception as e:  # noqa: BLE001 - delta-rs raises several types
        log.info("%s: delta-rs cannot read the deletion vectors (%s); they are checked without it", uri,
                 str(e).splitlines()[0][:200])
        return None
    from urllib.parse import unquote

    root = uri.rstrip("/")
    out: dict[str, list[bool]] = {}
    for location, keep in zip(table.column("filepath").to_pylist(), table.column("selection_vector").to_pylist()):
        rel = unquote(location)
        for prefix in (f"file://{root}/", f"{root}/"):
            if rel.startswith(prefix):
                rel = rel[len(prefix):]
                break
        out[rel] = keep
    return out


def _refused(path: str, why: str) -> VerificationError:
    return VerificationError(f"the deletion vector of {path} does not prove itself: {why}; nothing was written or "
                             "committed")
