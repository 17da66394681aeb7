"""A toy table format, written only inside the tests: a folder of parquet files and a JSON manifest listing
them (``_toy_manifest.json``: its version and each file's path, size and rows), committed by replacing the
manifest atomically with a version check (runtime/storage's ``replace_if_match``: the manifest compactor
read is still the one there, or nothing is written).

It exists to prove the neutral core: registered from the test (``register_format(SPEC)``), it passes the
same contract suite as Delta and the file sink without a line of compactor naming it. This module is all
of it: its ``FORMAT`` (the TableFormat), its plan words (the shared ``compact`` action only), its detection
(``detect``: the manifest file in the folder), its crash points and the writer the tests append with.

Its rewrite: journal the outputs (runtime/journal.py), rewrite each bin with the run's engine, check rows,
replace the manifest if it is still the version read, then delete the replaced files through the deletion
gate (a file the manifest lists is never deleted). A run killed after its commit leaves the replaced files
named as the journal entry's ``inputs``: recovery retires them.
"""

from __future__ import annotations

import datetime as dt
import json
import time
import uuid
from collections.abc import Callable, Collection, Mapping, Sequence
from dataclasses import dataclass, replace
from typing import TYPE_CHECKING, Any

import pyarrow as pa
import pyarrow.parquet as pq

from compactor.engines.base import BinJob, inputs_at
from compactor.errors import ApplyError, StalePlanError, TableReadError, VerificationError
from compactor.formats.base import ActionContext, NoSession, RepairsDuplicates, TableFormat, TableSession
from compactor.formats.demo import DemoTable
from compactor.models.formats import Folder, FormatSpec
from compactor.models.inspect import ComparedSettings, FileSizeSettings, InspectFindings
from compactor.models.report import LogGrowth
from compactor.models.results import ActionDetails, ActionOutcome
from compactor.models.state import TableState, files_table
from compactor.models.table import TableLocation
from compactor.planning.actions import Action, CompactAction
from compactor.planning.bins import BIN_MODELS
from compactor.planning.partitions import plan_partitions
from compactor.planning.plan import Skip, SkipReason, TablePlan
from compactor.planning.vocabulary import register
from compactor.policy.model import TablePolicy
from compactor.runtime import journal
from compactor.runtime.deletion import delete_proved
from compactor.runtime.faults import crash_point
from compactor.runtime.paths import filesystem, join
from compactor.runtime.storage import ObjectNotFoundError, Storage, storage_for

if TYPE_CHECKING:  # pragma: no cover
    from compactor.engines.spark_needs import SparkNeeds
    from compactor.models.writer import WriterSettings
    from compactor.project.model import SparkSettings

NAME = "toy"
MANIFEST = "_toy_manifest.json"
#: its crash points, in the order a rewrite reaches them
CRASH_POINTS: dict[str, str] = {
    "toy.journal_written": "the rewrite's journal names its outputs; nothing written yet",
    "toy.before_commit": "every output written and its rows checked; the manifest not yet replaced",
    "toy.after_commit": "the manifest is replaced; the replaced files not yet deleted",
}

#: the format's registry entry: this one module is its code, its plan words and its detection
SPEC = FormatSpec(NAME, __name__, __name__, __name__, (MANIFEST,), strategies=frozenset({"bin_pack"}),
                  retention=False)

register(NAME, shared=(CompactAction,))  # its plan words: the shared compact action, nothing of its own


def detect(folder: Folder) -> str | None:
    """A toy table is a folder holding the manifest file."""
    return MANIFEST if folder.has_file(MANIFEST) else None


# ----------------------------------------------------------------------------- the manifest


@dataclass(frozen=True)
class Entry:
    """One file the manifest lists."""

    path: str
    size: int
    rows: int
    added_ms: int


@dataclass(frozen=True)
class Manifest:
    version: int
    files: tuple[Entry, ...]

    def dumps(self) -> bytes:
        return json.dumps({"version": self.version, "files": [
            {"path": e.path, "size": e.size, "rows": e.rows, "added_ms": e.added_ms} for e in self.files]}).encode()


def _parse(data: bytes, where: str) -> Manifest:
    try:
        raw = json.loads(data)
        return Manifest(int(raw["version"]), tuple(Entry(str(f["path"]), int(f["size"]), int(f["rows"]),
                                                         int(f["added_ms"])) for f in raw["files"]))
    except (ValueError, KeyError, TypeError) as e:
        raise TableReadError(f"{where}/{MANIFEST} is not a toy manifest: {e}") from None


def _storage(table: TableLocation) -> Storage:
    return storage_for(table.uri, table.storage_options)


def read_manifest(table: TableLocation) -> tuple[Manifest, Any]:
    """The manifest and the version token ``replace_if_match`` takes."""
    try:
        data, token = _storage(table).read_versioned(MANIFEST)
    except ObjectNotFoundError:
        raise TableReadError(f"{table.uri}: no {MANIFEST}: not a toy table") from None
    return _parse(data, table.uri), token


def create(table: TableLocation) -> None:
    """An empty toy table."""
    if not _storage(table).create_exclusive(MANIFEST, Manifest(0, ()).dumps()):
        raise TableReadError(f"{table.uri}: a toy table is already there")


def append(table: TableLocation, rows: pa.Table) -> str:
    """Another writer's append: one new file, one manifest replace (a lost race raises). Returns its path."""
    path = f"part-{uuid.uuid4().hex}.parquet"
    fs, where = filesystem(join(table.uri, path), table.storage_options)
    pq.write_table(rows, where, filesystem=fs)
    size = _storage(table).head(path)
    manifest, token = read_manifest(table)
    entry = Entry(path, size.size if size is not None else 0, rows.num_rows, int(time.time() * 1000))
    new = Manifest(manifest.version + 1, (*manifest.files, entry))
    if _storage(table).replace_if_match(MANIFEST, new.dumps(), token) is None:
        raise StalePlanError(f"{table.uri}: the manifest changed during the append")
    return path


class ManifestGate:
    """The toy's deletion gate (runtime/deletion.py): a file the manifest lists now is kept, and so is
    anything with a hidden name (the manifest, compactor's own folder)."""

    def __init__(self, table: TableLocation) -> None:
        self.table = table

    def kept(self, files: Sequence[str], folders: Sequence[str] = ()) -> Mapping[str, str]:
        listed = {e.path for e in read_manifest(self.table)[0].files}
        out = {f: "listed by the toy manifest" for f in files if f in listed}
        out.update({f: "a hidden name" for f in files if f not in out
                    and any(p.startswith(("_", ".")) for p in f.split("/"))})
        for folder in folders:
            inside = next((p for p in sorted(listed) if p.startswith(folder.rstrip("/") + "/")), None)
            if inside is not None:
                out[folder] = f"it holds {inside}, listed by the toy manifest"
        return out


# ----------------------------------------------------------------------------- the format


def _recover(table: TableLocation, grace_s: float) -> list[str]:
    storage, gate = _storage(table), ManifestGate(table)

    def retire(rels: list[str]) -> None:  # the files a run killed after its commit replaced
        delete_proved(storage, gate, rels)

    return journal.recover(table.uri, lambda _since: gate, grace_s=grace_s, storage_options=table.storage_options,
                           retire=retire)


def _rewrite(action: CompactAction, ctx: ActionContext) -> ActionOutcome:
    table = ctx.location
    manifest, token = read_manifest(table)
    if manifest.version != action.precondition.table_version:
        raise StalePlanError(f"the toy manifest is at version {manifest.version}, the plan was made at "
                             f"{action.precondition.table_version}: another writer committed since; nothing changed")
    listed = {e.path: e for e in manifest.files}
    gone = [p for p in action.input_paths if p not in listed]
    if gone:
        raise StalePlanError(f"{len(gone)} planned file(s) are no longer in the manifest (e.g. {gone[0]})")
    if ctx.dry_run:
        return ActionOutcome(details=ActionDetails(dry_run=True))
    outputs = [f"part-{uuid.uuid4().hex}-compacted.parquet" for _ in action.bins]
    staging = [f"_compactor_staging_{uuid.uuid4().hex}" for _ in action.bins]
    jobs = [BinJob(inputs_at(*(join(table.uri, p) for p in b)), join(table.uri, out), join(table.uri, stg))
            for b, out, stg in zip(action.bins, outputs, staging)]
    entry = journal.ActionJournal(table.uri, ctx.commit_metadata.get("compactor.run_id", ""),
                                  ctx.commit_metadata.get("compactor.action") or f"toy-{uuid.uuid4().hex}",
                                  manifest.version, outputs=outputs, staging=staging, inputs=action.input_paths,
                                  storage_options=table.storage_options)
    try:
        with entry:
            crash_point("toy.journal_written")
            fs, first = filesystem(jobs[0].locations[0], table.storage_options)
            written = ctx.engine().rewrite(jobs, pq.read_schema(first, filesystem=fs))
            for b, w in zip(action.bins, written):
                planned = sum(listed[p].rows for p in b)
                if w.rows != w.rows_kept or w.rows_in != planned:
                    raise VerificationError(f"a bin of {len(b)} file(s) held {planned} rows by the manifest, "
                                            f"{w.rows_in} by their footers; the output holds {w.rows}")
            if ctx.fence is not None:
                ctx.fence()
            crash_point("toy.before_commit")
            now = int(time.time() * 1000)
            kept = tuple(e for e in manifest.files if e.path not in set(action.input_paths))
            added = tuple(Entry(out, w.size, w.rows, now) for out, w in zip(outputs, written))
            if _storage(table).replace_if_match(MANIFEST, Manifest(manifest.version + 1, kept + added).dumps(),
                                                token) is None:
                raise StalePlanError("the toy manifest changed during the rewrite; nothing was committed")
            crash_point("toy.after_commit")
            delete_proved(_storage(table), ManifestGate(table), action.input_paths)
    except BaseException:
        _recover(table, 0.0)  # this run's entry says it ended: its outputs no manifest lists go
        raise
    rows = sum(w.rows for w in written)
    return ActionOutcome(files_removed=len(action.input_paths), files_added=len(outputs),
                         bytes_removed=sum(listed[p].size for p in action.input_paths),
                         bytes_added=sum(w.size for w in written), rows_removed=rows, rows_added=rows,
                         version_before=manifest.version, version_after=manifest.version + 1,
                         removed_paths=action.input_paths, added_paths=tuple(outputs),
                         details=ActionDetails(method="rewrite", bins=len(jobs)))


class ToyFormat:
    name = NAME
    duplicates: RepairsDuplicates | None = None
    demo: DemoTable | None = None
    libraries: tuple[str, ...] = ()

    def spark_needs(self, spark: SparkSettings, loads: bool) -> tuple[SparkNeeds, ...]:
        return ()

    def read_state(self, table: TableLocation, policy: TablePolicy | None = None, *,
                   session: TableSession | None = None) -> TableState:
        manifest, _ = read_manifest(table)
        files = files_table([{"path": e.path, "size_bytes": e.size, "modification_time": e.added_ms,
                              "num_records": e.rows} for e in manifest.files])
        return TableState(uri=table.uri, format=NAME, version=manifest.version, partition_columns=(), files=files)

    def open_session(self, table: TableLocation) -> TableSession:
        return NoSession()

    def plan_table(self, policy: TablePolicy, state: TableState, *, now: dt.datetime, engine: str) -> TablePlan:
        base = TablePlan(name=policy.name, path=state.uri, format=NAME, engine=engine, version=state.version,
                         files_before=state.file_count, bytes_before=state.total_bytes, policy_source=str(policy.source))
        if not policy.enabled or not policy.compaction.enabled:
            return replace(base, files_after=state.file_count,
                           skipped=(Skip(SkipReason.DISABLED, None, {}, "compaction is disabled"),))
        actions, skips = plan_partitions(state.files, (), policy.compaction, now=now, bin_model=BIN_MODELS[0],
                                         version=state.version)
        removed = sum(a.input_files - a.expected_output_files for a in actions)
        return replace(base, actions=tuple(actions), skipped=tuple(skips), files_after=state.file_count - removed)

    def unsupported(self, state: TableState, engine: str) -> str | None:
        return None

    def live_paths(self, state: TableState) -> Collection[str]:
        return state.paths

    def run(self, action: Action, ctx: ActionContext) -> ActionOutcome:
        if not isinstance(action, CompactAction):
            raise ApplyError(f"{action.type} actions are not run on toy tables")
        return _rewrite(action, ctx)

    def group_key(self, action: Action, state: TableState, engine: Callable[[], Any], table: TableLocation) -> Any:
        return None

    def run_group(self, actions: tuple[Action, ...], ctx: ActionContext) -> list[Any]:
        raise ApplyError("toy actions are not grouped")

    def recover(self, table: TableLocation, *, grace_s: float) -> list[str]:
        return _recover(table, grace_s)

    def simulate(self, action: Action, state: TableState) -> TableState:
        return state

    def state_at(self, table: TableLocation, version: int) -> TableState | None:
        return None

    def inspect_settings(self, policy: TablePolicy) -> ComparedSettings:
        return FileSizeSettings(policy.compaction.min_file_size)

    def inspect(self, table: TableLocation, state: TableState, *,
                settings: ComparedSettings | None, horizon: int | None) -> InspectFindings:
        return InspectFindings()

    def log_growth(self, table: TableLocation, policy: TablePolicy) -> LogGrowth:
        return LogGrowth()

    def writer_settings(self, policy: TablePolicy) -> WriterSettings | None:
        return None


FORMAT: TableFormat = ToyFormat()
