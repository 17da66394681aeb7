"""The writer side of a sink policy: Spark settings and writeStream options the streaming job should
use, so one policy governs both the writer and the compactor (`compactor compile`)."""

from __future__ import annotations

from compactor.models.writer import WriterSettings
from compactor.policy.model import Sink, TablePolicy


def _duration(seconds: int) -> str:
    for unit, n in (("d", 86400), ("h", 3600), ("m", 60)):
        if seconds and seconds % n == 0:
            return f"{seconds // n}{unit}"
    return f"{seconds}s"


def writer_settings(policy: TablePolicy) -> WriterSettings:
    s = policy.sink or Sink()
    conf: dict[str, str] = {}
    opts: dict[str, str] = {}
    notes: list[str] = []
    if s.compact_interval is not None:
        conf["spark.sql.streaming.fileSink.log.compactInterval"] = str(s.compact_interval)
        notes.append("the interval is derived from the two newest .compact names: changing it only takes effect "
                     "from the next compaction batch on")
    if s.min_batches_to_retain is not None:
        conf["spark.sql.streaming.minBatchesToRetain"] = str(s.min_batches_to_retain)
    if s.cleanup_delay is not None:
        conf["spark.sql.streaming.fileSink.log.cleanupDelay"] = f"{s.cleanup_delay * 1000}"  # milliseconds
    if s.retention is not None:
        opts["retention"] = _duration(s.retention)
        notes.append("the sink `retention` option (Spark 3.1+) drops old entries from the manifest at each "
                     "compaction; it never deletes data files")
    if s.quiet_period:
        notes.append(f"compactor compacts only after the writer has been quiet for {_duration(s.quiet_period)}: "
                     "schedule it between runs of the query (e.g. after trigger(availableNow=True))")
    read: dict[str, str] = {}
    src = s.source
    if src is not None:
        if src.compact_interval is not None:
            conf["spark.sql.streaming.fileSource.log.compactInterval"] = str(src.compact_interval)
        if src.cleanup_delay is not None:
            conf["spark.sql.streaming.fileSource.log.cleanupDelay"] = f"{src.cleanup_delay * 1000}"  # milliseconds
        if src.max_file_age is not None:
            read["maxFileAge"] = _duration(src.max_file_age)
        if src.clean_source is not None:
            read["cleanSource"] = src.clean_source
        if src.source_archive_dir:
            read["sourceArchiveDir"] = src.source_archive_dir
        notes.append("the file source's log (checkpoint sources/N) keeps an entry per input file: maxFileAge bounds "
                     "what it remembers, cleanSource moves or deletes inputs once processed")
    return WriterSettings(policy.name, policy.path or "", conf, opts, tuple(notes), read)
