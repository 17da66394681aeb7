"""`compactor inspect` of a file-sink output: the health of its ``_spark_metadata`` log (manifest growth,
derived compact interval, retained batch files, the driver memory a manifest needs), compared with the
policy's log settings, and the 'delete' entries Spark ignores. Streaming checkpoints' logs are the same
log format (formats/checkpoint.py reads them with ``log_health`` and ``log_recommendations``).

For `compactor report`: the growth of those logs, file by file (``log_growth``)."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

from compactor.formats.file_sink.log import list_log
from compactor.formats.file_sink.state import METADATA_DIR, sink_facts
from compactor.models.inspect import ComparedSettings, InspectFindings, InspectSection
from compactor.models.report import LogGrowth, LogPoint, LogSeries
from compactor.models.state import TableState
from compactor.policy.model import TablePolicy
from compactor.runtime.storage import StorageError, storage_for
from compactor.units import format_size

#: driver heap per manifest entry when Spark loads a .compact (SinkFileStatus objects + strings), measured
#: order of magnitude; used only for an estimate
BYTES_PER_ENTRY = 600


@dataclass(frozen=True)
class SinkLogSettings:
    """A file-sink policy's log settings (its ``sink:`` block) that inspect compares the logs against."""

    compact_interval: int | None = None
    min_batches_to_retain: int | None = None
    #: seconds (the sink writeStream option ``retention``)
    retention: int | None = None


@dataclass(frozen=True)
class InspectSettings:
    """What inspect compares a file-sink output (or a streaming checkpoint's logs) against: the policy's
    min_file_size and its log settings (a ComparedSettings); the default: no policy."""

    min_file_size: int | None = None
    #: a file-sink policy's log settings (None: not a sink policy)
    sink: SinkLogSettings | None = None

    @property
    def compact_interval(self) -> int | None:
        return self.sink.compact_interval if self.sink is not None else None

    @property
    def min_batches_to_retain(self) -> int | None:
        return self.sink.min_batches_to_retain if self.sink is not None else None

    @property
    def retention(self) -> int | None:
        return self.sink.retention if self.sink is not None else None

    def to_dict(self) -> dict[str, Any]:
        """Only the settings the policy has (a sink policy: its log settings, even unset)."""
        out: dict[str, Any] = {} if self.min_file_size is None else {"min_file_size": self.min_file_size}
        if self.sink is not None:
            out.update(asdict(self.sink))
        return out


def inspect_settings(policy: TablePolicy) -> InspectSettings:
    """The settings of ``policy`` that inspect compares a sink's logs against."""
    s = policy.sink
    sink = None if s is None else SinkLogSettings(s.compact_interval, s.min_batches_to_retain, s.retention)
    return InspectSettings(policy.compaction.min_file_size, sink)


def log_settings(settings: ComparedSettings | None) -> InspectSettings:
    """``settings`` as a sink's: those another format read from its policy compare no log setting."""
    if isinstance(settings, InspectSettings):
        return settings
    return InspectSettings(settings.min_file_size if settings is not None else None)


@dataclass(frozen=True)
class LogHealth:
    """The health of one Spark metadata log: batches, compact interval, manifest growth, driver memory."""

    directory: str
    log_files: int
    latest_batch: int | None
    latest_compact: str | None
    compact_interval: int
    entries: int
    newest_compact_bytes: int
    growth_bytes_per_batch: float | None
    retained_batch_files: int
    estimated_driver_memory_bytes: int

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)

    def section(self, settings: InspectSettings) -> InspectSection:
        """The log's part of the inspect text (``settings``: the compact interval the policy asks)."""
        growth = "n/a" if self.growth_bytes_per_batch is None else f"{format_size(self.growth_bytes_per_batch)}/batch"
        want = settings.compact_interval
        return InspectSection(f"log {self.directory}", (
            f"batches: latest {self.latest_batch}, {self.log_files} log file(s), {self.retained_batch_files} plain "
            "batch file(s) retained",
            f"compact interval (derived): {self.compact_interval}" + (f" (policy: {want})" if want else ""),
            f"newest .compact: {self.latest_compact or '-'} {format_size(self.newest_compact_bytes)}, growth {growth}",
            f"entries: {self.entries}, estimated driver memory {format_size(self.estimated_driver_memory_bytes)}"))


def log_health(directory: Path | str, entries: int, storage_options: Mapping[str, str] | None = None) -> LogHealth:
    """The health of one Spark metadata log (``entries``: what its newest manifest lists)."""
    log = list_log(directory, storage_options)
    compacts = log.compacts
    growth = None
    if len(compacts) >= 2 and compacts[-1].batch > compacts[-2].batch:
        growth = (compacts[-1].size - compacts[-2].size) / (compacts[-1].batch - compacts[-2].batch)
    lc = log.latest_compact
    return LogHealth(str(directory), len(log.files), log.latest_batch, lc.name if lc else None,
                     log.compact_interval(), entries, lc.size if lc else 0, growth,
                     sum(1 for f in log.files if not f.compact), entries * BYTES_PER_ENTRY)


def log_recommendations(logs: Sequence[LogHealth], settings: InspectSettings) -> list[str]:
    """What to change, per log, compared with the policy's settings (and Spark's defaults)."""
    recs = []
    for lh in logs:
        want = settings.compact_interval
        if want and lh.compact_interval != want:
            recs.append(f"{lh.directory}: derived compact interval {lh.compact_interval} differs from the policy's "
                        f"{want}; set spark.sql.streaming.fileSink.log.compactInterval={want} (`compactor compile`)")
        keep = settings.min_batches_to_retain
        if keep and lh.retained_batch_files > keep + lh.compact_interval:
            recs.append(f"{lh.directory}: {lh.retained_batch_files} batch files retained, more than "
                        f"min_batches_to_retain={keep}: check spark.sql.streaming.fileSink.log.deletion/cleanupDelay")
        if lh.estimated_driver_memory_bytes > 512 << 20:
            recs.append(f"{lh.directory}: the manifest needs ~{lh.estimated_driver_memory_bytes >> 20} MiB of driver "
                        "memory to load")
        if "sources" in Path(lh.directory).parts:
            recs.append(f"{lh.directory}: the file-source log is never pruned by Spark: set the source option "
                        "maxFileAge and cleanSource (archive/delete) to bound it")
        elif lh.entries > 10_000 and not settings.retention:
            recs.append(f"{lh.directory}: {lh.entries} manifest entries and no retention: set the sink writeStream "
                        "option `retention` (e.g. 30d) or plan `sink_prune`")
        if lh.compact_interval < 3 and lh.log_files > 0:
            recs.append(f"{lh.directory}: compact interval {lh.compact_interval} rewrites the whole manifest almost "
                        "every batch: raise spark.sql.streaming.fileSink.log.compactInterval")
    return recs


def inspect_sink(uri: str, state: TableState, storage_options: Mapping[str, str],
                 settings: ComparedSettings | None) -> InspectFindings:
    """The sink's manifest log, and its 'delete' entries (``uri``: the output as the user named it)."""
    given = log_settings(settings)
    facts = sink_facts(state)
    lh = log_health("/".join([uri.rstrip("/"), METADATA_DIR]), facts.compact_entries, storage_options)
    recs = log_recommendations([lh], given)
    if facts.delete_entries:
        recs.append(f"the manifest has {facts.delete_entries} 'delete' entries: Spark >= 3.1 ignores them "
                    "and lists those files again")
    return InspectFindings(logs=(lh,), sections=(lh.section(given),), recommendations=tuple(recs))


def _log_points(directory: str, storage_options: Mapping[str, str] | None) -> list[LogPoint]:
    """(batch, bytes, entries, is_compact) for each file of a Spark metadata log."""
    try:
        log = list_log(directory, storage_options)
    except Exception:  # noqa: BLE001 - a missing or broken log is just not drawn
        return []
    out = []
    for f in sorted(log.files, key=lambda f: f.batch):
        try:
            n = len(log.read_entries(f))
        except Exception:  # noqa: BLE001
            n = 0
        out.append(LogPoint(f.batch, f.size, n, f.compact))
    return out


def log_growth(uri: str, storage_options: Mapping[str, str], checkpoint: str | None) -> LogGrowth:
    """The sink's manifest log file by file, and (``checkpoint`` given) each file source's log of its query."""
    logs = [LogSeries("manifest", METADATA_DIR, _log_points(f"{uri.rstrip('/')}/{METADATA_DIR}", storage_options))]
    if checkpoint:
        cp = checkpoint.rstrip("/")
        try:
            dirs = storage_for(cp, storage_options).list_dir("sources")[1]
        except StorageError:
            dirs = []
        for d in dirs:
            name = d.rsplit("/", 1)[-1]
            logs.append(LogSeries(f"checkpoint-source-{name}", f"checkpoint sources/{name}",
                                  _log_points(f"{cp}/{d}", storage_options), source=name))
    return LogGrowth(tuple(logs))
