"""Execute sink actions with the only safe procedure (writer stopped; see spark-file-sink-log.md):
rewrite each bin into a `_` staging folder, move the output into the same partition folder under a new
name, verify rows, then atomically replace the latest `.compact` (old entries minus replaced plus new).
Never a new batch id, never a new or deleted `.compact`, never a `delete` entry. Replaced files go to a
ledger and are deleted only after the grace period, by a later run, if no log file references them.

On object stores the same procedure runs through ``runtime.storage``: the latest `.compact` is replaced
by ONE conditional PUT (If-Match on the version that was read), so a concurrent change to it is detected
instead of overwritten, after the same re-check that no newer batch appeared. A PUT cannot keep the
file's mtime (which the writer guard reads), so the writer's mtime is recorded in
``_compactor/sink_swaps.json`` against the version compactor wrote (state.py reads it back).
The staging folder is written next to the output and the output is moved into place by copy + delete
(object stores have no rename); the journal (runtime/journal.py's ``ActionJournal``) names both, and the
inputs, so a kill at any point is recovered (recovery.py)."""

from __future__ import annotations

import datetime as dt
import json
import logging
import os
import time
import uuid
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq

from compactor.engines.base import BinJob, inputs_at
from compactor.errors import ApplyError, PlanError, SinkGuardError, StalePlanError, VerificationError
from compactor.formats.base import ActionContext, ActionOutcome
from compactor.formats.file_sink.actions import SinkCompactAction, SinkDeleteReplacedAction, SinkPruneAction
from compactor.formats.file_sink.location import SinkRoot
from compactor.formats.file_sink.log import list_log
from compactor.formats.file_sink.plan import readers_guard, writer_guard
from compactor.formats.file_sink.recovery import SinkReferences, add_to_ledger, clean_up, recover
from compactor.formats.file_sink.state import (
    LEDGER,
    METADATA_DIR,
    SWAPS,
    read_ledger,
    read_sink_state,
    read_swaps,
    sink_facts,
    sink_log,
)
from compactor.models.results import ActionDetails
from compactor.planning.actions import Action
from compactor.runtime.deletion import delete_proved
from compactor.runtime.faults import crash_point
from compactor.runtime.journal import ActionJournal
from compactor.runtime.paths import filesystem

log = logging.getLogger(__name__)


def run_sink_action(action: Action, ctx: ActionContext) -> ActionOutcome:
    """Run one sink action; the Spark rewrite uses the engine's session when the table's engine is spark."""
    sink = SinkRoot(ctx.table.path, ctx.storage_options)
    recover(sink)
    if isinstance(action, SinkDeleteReplacedAction):
        return _delete_replaced(sink, action, ctx)
    if not isinstance(action, (SinkCompactAction, SinkPruneAction)):
        raise ApplyError(f"{action.type} is not an action for file sinks")
    state = read_sink_state(sink.uri, ctx.storage_options, checkpoint=action.checkpoint)
    guard = writer_guard(action, state, dt.datetime.now(dt.UTC)) or readers_guard(action)
    if guard:
        raise SinkGuardError(f"refused, nothing changed: {guard}")
    lc_name = action.latest_compact
    facts = sink_facts(state)
    if facts.latest_compact != lc_name or facts.latest_batch != action.latest_batch:
        raise StalePlanError("the sink wrote new batches since planning (the writer ran); re-plan")
    listed = dict(zip(state.files.column("path").to_pylist(), state.files.column("in_compact").to_pylist()))
    missing = [p for p in action.input_paths if not listed.get(p)]
    if missing:
        raise StalePlanError(f"{len(missing)} planned file(s) are no longer in {lc_name} (e.g. {missing[0]})")
    found = {p: sink.rel(p) for p in action.input_paths}
    outside = [p for p, r in found.items() if r is None]
    if outside:
        # e.g. a copied or moved sink whose log still names the original location: rewriting (and later
        # deleting) those files would touch another directory's data
        raise ApplyError(f"{len(outside)} manifest entr(ies) lie outside {sink} (e.g. {outside[0]}); "
                         "refusing to rewrite files of another location")
    rels: dict[str, str] = {p: r for p, r in found.items() if r is not None}
    if ctx.dry_run:
        return ActionOutcome(details=ActionDetails(dry_run=True))
    if ctx.fence is not None:
        ctx.fence()
    if isinstance(action, SinkPruneAction):
        return _prune(sink, action, state)
    sizes = dict(zip(state.files.column("path").to_pylist(), state.files.column("size_bytes").to_pylist()))
    jobs: list[BinJob] = []
    finals: list[str] = []
    stagings: list[str] = []
    for b in action.bins:
        folders = {SinkRoot.folder(rels[p]) for p in b}
        if len(folders) != 1:
            raise ApplyError("a bin mixes partition folders; refusing to rewrite it")
        folder = folders.pop()
        staging = _join(folder, f"_compactor_staging_{uuid.uuid4().hex}")
        final = _join(folder, f"part-{uuid.uuid4()}-compactor.c000.snappy.parquet")
        finals.append(final)
        stagings.append(staging)
        jobs.append(BinJob(inputs_at(*(sink.location(rels[p]) for p in b)), sink.location(final),
                           sink.location(staging)))
    journal = ActionJournal(sink.uri, ctx.commit_metadata.get("compactor.run_id", ""), _journal_name(ctx), None,
                            outputs=finals, staging=stagings, inputs=[rels[p] for p in action.input_paths],
                            storage_options=sink.storage_options)
    try:
        with journal:  # on storage before anything is written; kept, marked ended, when the rewrite fails
            crash_point("sink.journal_written")
            schema = _instants(pa.unify_schemas([_read_schema(i, ctx) for i in {i for j in jobs for i in j.locations}]),
                               {i for j in jobs for i in j.locations}, ctx)
            written = _engine(ctx).rewrite(jobs, schema)
            for job, w in zip(jobs, written):
                if w.rows != w.rows_kept:
                    raise VerificationError(f"rewrite of {len(job.inputs)} file(s) produced {w.rows} rows, "
                                            f"expected {w.rows_kept}")
            rows_in = rows_out = sum(w.rows for w in written)
            bytes_in = sum(int(sizes.get(p) or 0) for p in action.input_paths)
            new_entries = [(SinkRoot.sibling_entry(b[0], final.rsplit("/", 1)[-1]), w.size)
                           for b, final, w in zip(action.bins, finals, written)]
            if ctx.fence is not None:
                ctx.fence()
            crash_point("sink.before_swap")
            _replace_compact(sink, lc_name, set(action.input_paths), new_entries, sink_facts(state).latest_batch)
            crash_point("sink.after_swap")
            add_to_ledger(sink, [sink.location(rels[p]) for p in action.input_paths])
    except BaseException:
        clean_up(sink)  # this run's entry says it ended: its unlisted outputs and staging folders go
        raise
    return ActionOutcome(files_removed=len(action.input_paths), files_added=len(new_entries), bytes_removed=bytes_in,
                         bytes_added=sum(size for _, size in new_entries), rows_removed=rows_in,
                         rows_added=rows_out, version_before=state.version, version_after=state.version,
                         details=ActionDetails(manifest=lc_name))


def _join(folder: str, name: str) -> str:
    return f"{folder}/{name}" if folder else name


def _instants(schema: pa.Schema, inputs: set[str], ctx: ActionContext) -> pa.Schema:
    """Spark writes timestamps as INT96 by default: UTC instants (Spark's TIMESTAMP, read in the session
    time zone). pyarrow reads them as timezone-less; written back that way they would be read as
    TIMESTAMP_NTZ (wall-clock values). Their columns are written as UTC-adjusted microseconds instead:
    the same instants, the type Spark reads as TIMESTAMP."""
    int96: set[str] = set()
    for location in inputs:
        fs, path = filesystem(location, ctx.storage_options)
        md = pq.ParquetFile(path, filesystem=fs).metadata
        int96 |= {md.schema.column(i).path for i in range(md.num_columns)
                  if md.schema.column(i).physical_type == "INT96"}
    if not int96:
        return schema
    fields = [f.with_type(pa.timestamp("us", tz="UTC")) if f.name in int96 and pa.types.is_timestamp(f.type) else f
              for f in schema]
    return pa.schema(fields, metadata=schema.metadata)


def _read_schema(location: str, ctx: ActionContext) -> pa.Schema:
    fs, path = filesystem(location, ctx.storage_options)
    return pq.read_schema(path, filesystem=fs)


def _journal_name(ctx: ActionContext) -> str:
    """The entry's name in the table's journal folder: the action's commit marker, unique per action."""
    marker = ctx.commit_metadata.get("compactor.action")
    return f"{marker}:sink" if marker else f"sink-{uuid.uuid4().hex}"


def _engine(ctx: ActionContext) -> Any:
    """The rewrite engine of the table's engine: Spark for a spark-engine table, pyarrow otherwise (a
    sink planned under a local target never needs a JVM)."""
    engine = ctx.engine()
    if engine.name == ctx.table.engine:
        return engine
    from compactor.engines.local import LocalEngine

    return LocalEngine(ctx.storage_options, ctx.target.threads)


def _replace_compact(sink: SinkRoot, lc_name: str | None, replaced: set[str], new: list[tuple[str, int]],
                     latest_batch: int | None) -> None:
    """Atomically replace the latest .compact: its entries minus the replaced paths, plus the new files
    (``new``: (manifest entry, size))."""
    assert lc_name is not None
    rel = f"{METADATA_DIR}/{lc_name}"
    data, version = sink.storage.read_versioned(rel)
    lines = data.decode("utf-8").split("\n")
    header, body = lines[0], [ln for ln in lines[1:] if ln.strip()]
    kept, template = [], None
    for ln in body:
        e = json.loads(ln)
        template = template or e
        if e["path"] not in replaced:
            kept.append(ln)
    now = int(time.time() * 1000)
    for entry_path, size in new:
        entry = {"path": entry_path, "size": size, "isDir": False, "modificationTime": now,
                 "blockReplication": (template or {}).get("blockReplication", 1),
                 "blockSize": (template or {}).get("blockSize", 33554432), "action": "add"}
        kept.append(json.dumps(entry, separators=(",", ":")))
    content = "\n".join([header] + kept).encode("utf-8")  # Spark writes no trailing newline
    log_dir = sink.location(METADATA_DIR)
    if not sink.remote:
        _replace_local(sink, rel, content, latest_batch, log_dir)
        return
    mlog = sink_log(sink)
    # last check: the writer has not produced a newer batch meanwhile (then our manifest would be stale)
    if mlog.latest_batch != latest_batch:
        raise StalePlanError("the sink wrote a new batch during compaction; nothing was changed")
    before = next((lf for lf in mlog.files if lf.name == lc_name), None)
    written = sink.storage.replace_if_match(rel, content, version)
    if written is None:
        raise StalePlanError(f"{lc_name} was changed by another writer during compaction; nothing was changed")
    # the writer guard reads log mtimes as writer activity: remember the writer's, for our own version
    present = {lf.name for lf in mlog.files}
    swaps = {k: v for k, v in read_swaps(sink).items() if k in present}  # the writer's cleanup removed the rest
    swaps[lc_name] = {"e_tag": written.e_tag, "mtime_ms": before.mtime_ms if before else now}
    sink.storage.write_bytes(SWAPS, json.dumps(swaps).encode())
    sink.storage.delete(f"{METADATA_DIR}/.{lc_name}.crc")


def _replace_local(sink: SinkRoot, rel: str, content: bytes, latest_batch: int | None, log_dir: str) -> None:
    from pathlib import Path

    compact = Path(sink.location(rel))
    tmp = compact.parent / f".{compact.name}.compactor-{uuid.uuid4().hex}.tmp"
    with open(tmp, "wb") as fh:
        fh.write(content)
        fh.flush()
        os.fsync(fh.fileno())
    # last check: the writer has not produced a newer batch meanwhile (then our manifest would be stale)
    if list_log(log_dir).latest_batch != latest_batch:
        tmp.unlink()
        raise StalePlanError("the sink wrote a new batch during compaction; nothing was changed")
    # keep the manifest's mtime: the writer guard reads log mtimes as writer activity, and our own swap
    # must not look like a running query (it would refuse the next action of this very run)
    st = compact.stat()
    os.utime(tmp, ns=(st.st_atime_ns, st.st_mtime_ns))
    os.replace(tmp, compact)
    (compact.parent / f".{compact.name}.crc").unlink(missing_ok=True)


def _delete_replaced(sink: SinkRoot, action: SinkDeleteReplacedAction, ctx: ActionContext) -> ActionOutcome:
    due = set(action.files)
    # only files compactor itself replaced (its ledger), inside the sink once resolved, never a log file
    recorded = {e["file"] for e in read_ledger(sink)}
    refused = sorted(f for f in due if f not in recorded or not _inside_data(sink, f))
    if refused:
        raise PlanError(f"{len(refused)} file(s) to delete are not files compactor replaced in this sink (e.g. "
                        f"{refused[0]}): the plan was edited; nothing was deleted", hint="re-run `compactor plan`")
    if ctx.fence is not None and not ctx.dry_run:
        ctx.fence()
    rels = {rel: f for f in sorted(due) if (rel := sink.rel_of_location(f)) is not None}
    # the gate keeps a file any log file still lists (an older batch's reader could need it), not only the visible
    gate = SinkReferences(sink, lambda mlog: mlog.files)
    if ctx.dry_run:
        kept = gate.kept(tuple(rels))
        deleted: list[str] = []
    else:
        done = delete_proved(sink.storage, gate, [r for r in rels if sink.storage.exists(r)])
        kept, deleted = dict(done.kept), [rels[r] for r in done.deleted]
    still = {rels[r] for r in kept}
    if not ctx.dry_run and sink.storage.exists(LEDGER):
        gone = set(deleted) | (due - still)
        entries = [e for e in read_ledger(sink) if e["file"] not in gone]
        sink.storage.write_bytes(LEDGER, json.dumps(entries).encode())
    return ActionOutcome(files_removed=len(deleted), details=ActionDetails(deleted=len(deleted),
                                                                          still_referenced=len(still)))


def _inside_data(sink: SinkRoot, location: str) -> bool:
    """``location`` is a data file of the sink: inside its root once resolved (symlinks, ``..``), not in
    ``_spark_metadata`` or any other ``_`` folder."""
    import os

    from compactor.planning.integrity import path_problem

    rel = sink.rel_of_location(location)
    if rel is None or path_problem(rel) is not None or any(p.startswith("_") for p in rel.split("/")[:-1]):
        return False
    if sink.remote or sink.path is None:
        return True
    root = os.path.realpath(sink.path)
    return os.path.realpath(os.path.join(root, rel)).startswith(root + os.sep)


def _prune(sink: SinkRoot, action: SinkPruneAction, state: Any) -> ActionOutcome:
    """Drop the planned entries from the latest .compact (same atomic replace); their data files go to the
    ledger only when the policy asked to delete them."""
    lc_name = action.latest_compact
    assert lc_name is not None
    _replace_compact(sink, lc_name, set(action.input_paths), [], sink_facts(state).latest_batch)
    if action.delete_files:
        rels = [sink.rel(p) for p in action.input_paths]
        add_to_ledger(sink, [sink.location(r) for r in rels if r is not None])
    return ActionOutcome(files_removed=len(action.input_paths), version_before=state.version,
                         version_after=state.version, details=ActionDetails(manifest=lc_name,
                                                                                   pruned=len(action.input_paths)))
