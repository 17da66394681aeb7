"""A Structured Streaming checkpoint (offsets/, commits/, sources/) for `compactor inspect`: not a table
format, but its logs are Spark metadata logs, read as a file sink's (formats/file_sink/inspection.py)."""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path

from compactor.formats.file_sink.inspection import log_health, log_recommendations, log_settings
from compactor.formats.file_sink.log import list_log, source_entries_table
from compactor.models.inspect import ComparedSettings, InspectReport
from compactor.runtime.storage import storage_for

#: the folders of a streaming checkpoint
CHECKPOINT_DIRS = frozenset({"offsets", "commits", "sources"})


def inspect_checkpoint(path: str, storage_options: Mapping[str, str],
                       settings: ComparedSettings) -> InspectReport | None:
    """The health of the checkpoint's logs (each file source's log, offsets, commits), compared with
    ``settings`` (a sink policy's log settings, when its policy is one); None when ``path`` is no
    streaming checkpoint."""
    st = storage_for(path, storage_options)
    _, dirs = st.list_dir("")
    names = {d.rsplit("/", 1)[-1] for d in dirs}
    if not names & CHECKPOINT_DIRS:
        return None

    def sub(*parts: str) -> str:
        return "/".join([str(path).rstrip("/"), *parts])

    logs = []
    for d in st.list_dir("sources")[1] if "sources" in names else []:
        if st.list_dir(d)[0]:
            mlog = list_log(sub(d), storage_options)
            if mlog.files:
                logs.append(log_health(sub(d), source_entries_table(mlog).num_rows, storage_options))
    for s in ("offsets", "commits"):
        if s in names:
            logs.append(log_health(sub(s), 0, storage_options))
    given = log_settings(settings)
    recs = log_recommendations([lh for lh in logs if "sources" in Path(lh.directory).parts], given)
    return InspectReport(path, "checkpoint", logs=tuple(logs), policy=settings, recommendations=tuple(recs),
                         sections=tuple(lh.section(given) for lh in logs), holds_table=False)
