"""The content proof a repair must pass before it commits (formats/delta/duplicates/repair_plan.py, checks (1)-(3)).

Rows are compared as exact multisets: every column of every file (floats by their bit pattern, so
-0.0, 0.0 and each NaN payload stay distinct), plus the file's partition values as the log spells them.
Files written under another schema (a column added since) are aligned by name; a column a file lacks
reads as null in both sides of the comparison alike.

    (1) rows(remove) == rows(restore) + rows(excess)      the repair takes out exactly the extra copy
    (2) the excess files were not live the version before their anomaly (delta-rs' own snapshot)
    (3) rows(checked excess) are all still in rows(keep + restore)   the other copy is whole
"""

from __future__ import annotations

import struct
from collections import Counter
from collections.abc import Callable, Iterable, Mapping, Sequence
from typing import Any

from compactor.formats.delta.duplicates.repair_plan import RepairProposal

#: reads one file's rows: path -> a pyarrow Table (raises FileNotFoundError when the file is gone)
Reader = Callable[[str], Any]


def _canonical(value: Any) -> Any:
    if isinstance(value, float):
        return ("f", struct.pack("<d", value))
    if isinstance(value, dict):
        return tuple(sorted((k, _canonical(v)) for k, v in value.items()))
    if isinstance(value, list):
        return tuple(_canonical(v) for v in value)
    return value


def rows_of(table: Any, partition: Mapping[str, str | None]) -> Counter[tuple[Any, ...]]:
    """The multiset of a file's rows: (column name, value) pairs in name order, partition values last (as
    the log spells them: a writer may also store a partition column in the file, readers take the log's)."""
    names = sorted(n for n in table.column_names if n not in partition)
    cols = [table.column(n).to_pylist() for n in names]
    pv = tuple(sorted((f"partition:{k}", v) for k, v in partition.items()))
    out: Counter[tuple[Any, ...]] = Counter()
    for i in range(table.num_rows):
        out[tuple((n, _canonical(c[i])) for n, c in zip(names, cols) if c[i] is not None) + pv] += 1
    return out


class ContentCheck:
    """Reads each file once and proves (1) and (3); (2) needs delta-rs and is ``excess_live_before``."""

    def __init__(self, read: Reader, partitions: Mapping[str, Mapping[str, str | None]]):
        self._read = read
        self._partitions = partitions
        self._rows: dict[str, Counter[tuple[Any, ...]]] = {}

    def rows(self, path: str) -> Counter[tuple[Any, ...]]:
        if path not in self._rows:
            self._rows[path] = rows_of(self._read(path), self._partitions.get(path) or {})
        return self._rows[path]

    def total(self, paths: Iterable[str]) -> Counter[tuple[Any, ...]]:
        out: Counter[tuple[Any, ...]] = Counter()
        for p in paths:
            out.update(self.rows(p))
        return out

    def problem(self, proposal: RepairProposal) -> str | None:
        """Why the repair must not commit, or None when (1) and (3) hold."""
        removed = self.total(proposal.remove)
        restored = self.total(proposal.restore)
        excess = self.total(p for _, p in proposal.excess)
        if removed != restored + excess:
            missing = sum((restored + excess - removed).values())
            extra = sum((removed - restored - excess).values())
            return (f"the {len(proposal.remove)} file(s) the repair removes do not hold exactly the rows it restores "
                    f"plus the extra copy ({extra} row(s) would be lost, {missing} not found): not a pure rewrite")
        kept = self.total((*proposal.keep, *proposal.restore))
        for a in proposal.anomalies:
            mine = self.total(p for v, p in proposal.excess if v == a and p in proposal.checked)
            lost = mine - kept
            if lost:
                return (f"{sum(lost.values())} row(s) of the extra copy version {a} made are not in the files that "
                        "hold the other copy: removing them would lose rows")
        return None


def excess_live_before(proposal: RepairProposal, live_at: Callable[[int], set[str]],
                       repairs: Sequence[int]) -> str | None:
    """(2): an anomaly's excess files must not have been live the version before it (delta-rs' own
    snapshot; a stale repair's excess are its own adds, so it is not checked)."""
    for a in proposal.anomalies:
        if a in repairs:
            continue
        live = live_at(a - 1)
        back = sorted(p for v, p in proposal.excess if v == a and p in live)
        if back:
            return (f"{back[0]}, which the log replay says version {a} removed a second time, was live in version "
                    f"{a - 1} by delta-rs' own snapshot: the replay is wrong, nothing is repaired")
    return None
