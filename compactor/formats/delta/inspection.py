"""`compactor inspect` of a Delta table: duplicate rewrites in the log (rows live twice), and a warning
when the writers' auto compaction races compactor."""

from __future__ import annotations

from compactor.formats.delta.duplicates.detection import DEFAULT_HORIZON, detect
from compactor.models.inspect import InspectFindings
from compactor.models.state import TableState
from compactor.models.table import TableLocation

AUTO_COMPACT = "delta.autoOptimize.autoCompact"


def inspect_delta(table: TableLocation, state: TableState, *, policy_given: bool,
                  horizon: int | None) -> InspectFindings:
    """``horizon``: how many of the newest commits to scan for duplicate rewrites. ``policy_given``: a
    policy manages the table (auto compaction is then a warning, not a recommendation)."""
    warnings: list[str] = []
    recs: list[str] = []
    found = detect(table, version=state.version, horizon=horizon or DEFAULT_HORIZON)
    dups = tuple(found.history)
    open_ = [d for d in dups if d.status == "open"]
    if open_:
        rows = sum(d.rows or 0 for d in open_)
        warnings.append(f"{len(open_)} duplicate rewrite(s): rows are live twice ({rows:,} known): another "
                        "compaction removed files a compaction had already removed; run `compactor repair "
                        f"{state.uri}`")
    auto = str(state.properties.get(AUTO_COMPACT, "false")).strip().lower()
    if auto not in ("false", "off", "0", ""):
        msg = (f"{AUTO_COMPACT}={auto}: the writers' auto compaction rewrites the same small files as compactor "
               "and can race it (duplicate rewrites); set it to false, or schedule it apart (README, Safety model)")
        (warnings if policy_given else recs).append(msg if policy_given else f"if compactor manages this table: {msg}")
    return InspectFindings(duplicates=dups, log_window=found.window(), warnings=tuple(warnings),
                           recommendations=tuple(recs))
