"""Execute sink actions with the only safe procedure (writer stopped; see spark-file-sink-log.md):
rewrite each bin into a `_` staging folder, move the output into the same partition folder under a new
name, verify rows, then atomically replace the latest `.compact` (old entries minus replaced plus new).
Never a new batch id, never a new or deleted `.compact`, never a `delete` entry. Replaced files go to a
ledger and are deleted only after the grace period, by a later run, if no log file references them."""

from __future__ import annotations

import datetime as dt
import json
import logging
import os
import shutil
import time
import uuid
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq

from compactor.engines.base import BinJob
from compactor.errors import ApplyError, SinkGuardError, StalePlanError, VerificationError
from compactor.formats.base import ActionContext, ActionOutcome
from compactor.formats.file_sink.log import entry_local_path, list_log, read_entries
from compactor.formats.file_sink.plan import readers_guard, writer_guard
from compactor.formats.file_sink.state import LEDGER, METADATA_DIR, read_sink_state
from compactor.planning.actions import Action, SinkCompactAction, SinkDeleteReplacedAction, SinkPruneAction

log = logging.getLogger(__name__)
JOURNAL = "_compactor/sink_journal.json"


def recover(root: Path) -> list[str]:
    """Delete files a killed run wrote but never listed in the manifest, and its staging folders."""
    j = root / JOURNAL
    if not j.is_file():
        return []
    try:
        entry = json.loads(j.read_text())
    except ValueError:
        entry = {}
    visible = {str(entry_local_path(e["path"], root)) for lf in list_log(root / METADATA_DIR).visible_files()
               for e in read_entries(lf.path)}
    removed: list[str] = []
    files = entry.get("files", [])
    for f in files:
        if f not in visible and os.path.exists(f):
            os.remove(f)
            removed.append(f)
    if any(f in visible for f in files) and entry.get("inputs"):
        # killed after the manifest swap: the replaced inputs still go through the grace period
        _add_to_ledger(root, [i for i in entry["inputs"] if i not in visible])
    for s in entry.get("staging", []):
        shutil.rmtree(s, ignore_errors=True)
    j.unlink()
    return removed


def run_sink_action(action: Action, ctx: ActionContext) -> ActionOutcome:
    """Run one sink action; the Spark rewrite uses the engine's session when the table's engine is spark."""
    root = Path(ctx.table.path)
    recover(root)
    if isinstance(action, SinkDeleteReplacedAction):
        return _delete_replaced(root, action, ctx)
    if not isinstance(action, (SinkCompactAction, SinkPruneAction)):
        raise ApplyError(f"{action.type} is not an action for file sinks")
    state = read_sink_state(str(root), checkpoint=action.checkpoint)
    guard = writer_guard(action, state, dt.datetime.now(dt.timezone.utc)) or readers_guard(action)
    if guard:
        raise SinkGuardError(f"refused, nothing changed: {guard}")
    lc_name = action.latest_compact
    if state.extra.get("latest_compact") != lc_name or state.extra.get("latest_batch") != action.latest_batch:
        raise StalePlanError("the sink wrote new batches since planning (the writer ran); re-plan")
    listed = dict(zip(state.files.column("path").to_pylist(), state.files.column("in_compact").to_pylist()))
    missing = [p for p in action.input_paths if not listed.get(p)]
    if missing:
        raise StalePlanError(f"{len(missing)} planned file(s) are no longer in {lc_name} (e.g. {missing[0]})")
    outside = [p for p in action.input_paths if not _is_under(entry_local_path(p, root), root)]
    if outside:
        # e.g. a copied or moved sink whose log still names the original location: rewriting (and later
        # deleting) those files would touch another directory's data
        raise ApplyError(f"{len(outside)} manifest entr(ies) lie outside {root} (e.g. {outside[0]}); "
                         "refusing to rewrite files of another location")
    if ctx.dry_run:
        return ActionOutcome(details={"dry_run": True})
    if isinstance(action, SinkPruneAction):
        return _prune(root, action, state)
    journal = {"files": [], "staging": [], "inputs": [str(entry_local_path(p, root)) for p in action.input_paths]}
    jobs: list[BinJob] = []
    for b in action.bins:
        inputs = [entry_local_path(p, root) for p in b]
        part_dir = inputs[0].parent
        if any(p.parent != part_dir for p in inputs):
            raise ApplyError("a bin mixes partition folders; refusing to rewrite it")
        staging = part_dir / f"_compactor_staging_{uuid.uuid4().hex}"
        final = part_dir / f"part-{uuid.uuid4()}-compactor.c000.snappy.parquet"
        journal["files"].append(str(final))
        journal["staging"].append(str(staging))
        jobs.append(BinJob(tuple(str(p) for p in inputs), str(final), str(staging)))
    try:
        _write_journal(root, journal)
        schema = pa.unify_schemas([pq.read_schema(p) for p in {i for j in jobs for i in j.inputs}])
        written = _engine(ctx).rewrite(jobs, schema)
        for job, w in zip(jobs, written):
            if w.rows != w.rows_in:
                raise VerificationError(f"rewrite of {len(job.inputs)} file(s) produced {w.rows} rows, expected "
                                        f"{w.rows_in}")
        rows_in = rows_out = sum(w.rows for w in written)
        bytes_in = sum(os.path.getsize(i) for j in jobs for i in j.inputs)
        new_entries = [(b[0], Path(w.location)) for b, w in zip(action.bins, written)]
        replaced = set(action.input_paths)
        _replace_compact(root / METADATA_DIR / lc_name, replaced, new_entries, state.extra.get("latest_batch"))
    except BaseException:
        recover(root)
        raise
    _add_to_ledger(root, [str(entry_local_path(p, root)) for p in action.input_paths])
    (root / JOURNAL).unlink(missing_ok=True)
    return ActionOutcome(files_removed=len(action.input_paths), files_added=len(new_entries), bytes_removed=bytes_in,
                         bytes_added=sum(f.stat().st_size for _, f in new_entries), rows_removed=rows_in,
                         rows_added=rows_out, version_before=state.version, version_after=state.version,
                         details={"manifest": lc_name})


def _is_under(path: Path, root: Path) -> bool:
    return path.resolve().is_relative_to(root.resolve())


def _write_journal(root: Path, journal: dict) -> None:
    (root / JOURNAL).parent.mkdir(parents=True, exist_ok=True)
    tmp = root / (JOURNAL + ".tmp")
    tmp.write_text(json.dumps(journal))
    os.replace(tmp, root / JOURNAL)


def _engine(ctx: ActionContext) -> Any:
    """The rewrite engine of the table's engine: Spark for a spark-engine table, pyarrow otherwise (a
    sink planned under a local target never needs a JVM)."""
    engine = ctx.engine()
    if engine.name == ctx.table.engine:
        return engine
    from compactor.engines.local import LocalEngine

    return LocalEngine(ctx.storage_options, ctx.target.threads)


def _uri_like(example: str, path: Path) -> str:
    """A new entry's path in the same form as the existing ones (file URI or plain path)."""
    return path.as_uri() if example.startswith("file:") else str(path)


def _replace_compact(compact: Path, replaced: set[str], new: list[tuple[str, Path]], latest_batch: int | None) -> None:
    """Atomically replace the latest .compact: its entries minus the replaced paths, plus the new files."""
    lines = compact.read_text(encoding="utf-8").split("\n")
    header, body = lines[0], [ln for ln in lines[1:] if ln.strip()]
    kept, template = [], None
    for ln in body:
        e = json.loads(ln)
        template = template or e
        if e["path"] not in replaced:
            kept.append(ln)
    now = int(time.time() * 1000)
    for example_path, f in new:
        entry = {"path": _uri_like(example_path, f), "size": f.stat().st_size, "isDir": False, "modificationTime": now,
                 "blockReplication": (template or {}).get("blockReplication", 1),
                 "blockSize": (template or {}).get("blockSize", 33554432), "action": "add"}
        kept.append(json.dumps(entry, separators=(",", ":")))
    tmp = compact.parent / f".{compact.name}.compactor-{uuid.uuid4().hex}.tmp"
    with open(tmp, "w", encoding="utf-8") as fh:
        fh.write("\n".join([header] + kept))  # Spark writes no trailing newline
        fh.flush()
        os.fsync(fh.fileno())
    # last check: the writer has not produced a newer batch meanwhile (then our manifest would be stale)
    if list_log(compact.parent).latest_batch != latest_batch:
        tmp.unlink()
        raise StalePlanError("the sink wrote a new batch during compaction; nothing was changed")
    # keep the manifest's mtime: the writer guard reads log mtimes as writer activity, and our own swap
    # must not look like a running query (it would refuse the next action of this very run)
    st = compact.stat()
    os.utime(tmp, ns=(st.st_atime_ns, st.st_mtime_ns))
    os.replace(tmp, compact)
    (compact.parent / f".{compact.name}.crc").unlink(missing_ok=True)


def _add_to_ledger(root: Path, files: list[str]) -> None:
    path = root / LEDGER
    entries = json.loads(path.read_text()) if path.is_file() else []
    now = time.time()
    entries += [{"file": f, "replaced_at": now} for f in files]
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_suffix(".tmp")
    tmp.write_text(json.dumps(entries))
    os.replace(tmp, path)


def _delete_replaced(root: Path, action: SinkDeleteReplacedAction, ctx: ActionContext) -> ActionOutcome:
    referenced = {str(entry_local_path(e["path"], root)) for lf in list_log(root / METADATA_DIR).files
                  for e in read_entries(lf.path)}
    due = set(action.files)
    deleted, kept = [], []
    for f in sorted(due):
        if f in referenced:
            kept.append(f)  # an older log file still lists it: a reader of that batch could need it
        elif not ctx.dry_run and os.path.exists(f):
            os.remove(f)
            deleted.append(f)
    path = root / LEDGER
    if not ctx.dry_run and path.is_file():
        entries = [e for e in json.loads(path.read_text()) if e["file"] not in set(deleted) | (due - set(kept))]
        tmp = path.with_suffix(".tmp")  # a kill mid-write must not truncate the ledger
        tmp.write_text(json.dumps(entries))
        os.replace(tmp, path)
    return ActionOutcome(files_removed=len(deleted), details={"deleted": len(deleted), "still_referenced": len(kept)})


def _prune(root: Path, action: SinkPruneAction, state: Any) -> ActionOutcome:
    """Drop the planned entries from the latest .compact (same atomic replace); their data files go to the
    ledger only when the policy asked to delete them."""
    lc_name = action.latest_compact
    assert lc_name is not None
    _replace_compact(root / METADATA_DIR / lc_name, set(action.input_paths), [], state.extra.get("latest_batch"))
    if action.delete_files:
        _add_to_ledger(root, [str(entry_local_path(p, root)) for p in action.input_paths])
    return ActionOutcome(files_removed=len(action.input_paths), version_before=state.version,
                         version_after=state.version, details={"manifest": lc_name, "pruned": len(action.input_paths)})
