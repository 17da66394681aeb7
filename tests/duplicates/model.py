"""An in-memory Delta log for testing the duplicate replay: files hold sets of row ids, commits add and
remove paths exactly as a log does (a remove of a path that is not live changes nothing; an add of a
live path replaces it), and no conflict checker stops two rewrites of the same files."""

from __future__ import annotations

import json
import random
from collections import Counter
from dataclasses import dataclass, field

from compactor.formats.delta.duplicates import RepairPlan
from compactor.formats.delta.log import Commit


@dataclass
class Log:
    commits: list[Commit] = field(default_factory=list)
    content: dict[str, tuple[int, ...]] = field(default_factory=dict)  # path -> row ids (files are immutable)
    live: set[str] = field(default_factory=set)
    next_row: int = 0
    next_file: int = 0

    @property
    def version(self) -> int:
        return len(self.commits) - 1

    def _new_path(self) -> str:
        self.next_file += 1
        return f"f{self.next_file}.parquet"

    def _add(self, path: str, data_change: bool) -> dict:
        return {"path": path, "dataChange": data_change, "size": 10 * len(self.content[path]),
                "partitionValues": {}, "stats": json.dumps({"numRecords": len(self.content[path])})}

    def commit(self, adds: dict[str, dict], removes: dict[str, dict], info: dict | None = None) -> int:
        c = Commit(len(self.commits), adds, removes, info or {})
        self.commits.append(c)
        self.live -= set(removes)
        self.live |= set(adds)
        return c.version

    def append(self, rows: int = 3) -> str:
        p = self._new_path()
        self.content[p] = tuple(range(self.next_row, self.next_row + rows))
        self.next_row += rows
        self.commit({p: self._add(p, True)}, {})
        return p

    def rewrite(self, inputs: list[str], outputs: int = 1, data_change: bool = False) -> int:
        """A compaction of ``inputs`` (as some possibly stale snapshot saw them) into ``outputs`` files."""
        rows = [r for p in inputs for r in self.content[p]]
        adds = {}
        for i in range(outputs):
            p = self._new_path()
            self.content[p] = tuple(rows[i::outputs])
            adds[p] = self._add(p, data_change)
        return self.commit(adds, {p: {"path": p, "dataChange": data_change} for p in inputs})

    def apply_repair(self, plan: RepairPlan) -> int:
        adds = {p: self._add(p, False) for p in plan.restore}
        return self.commit(adds, {p: {"path": p, "dataChange": False} for p in plan.remove},
                           {"compactor.repair_of": ",".join(map(str, plan.duplicates))})

    def rows(self) -> Counter:
        return Counter(r for p in self.live for r in self.content[p])

    def duplicated(self) -> list[int]:
        c = self.rows()
        return sorted(r for r, n in c.items() if n != 1)

    def row_counts(self) -> dict[str, int]:
        return {p: len(v) for p, v in self.content.items()}


def random_history(rng: random.Random, steps: int = 30) -> Log:
    """Appends and compactions, each compaction planned on a snapshot up to a few versions old."""
    log = Log()
    snapshots: list[set[str]] = []
    for _ in range(4):
        log.append()
        snapshots.append(set(log.live))
    for _ in range(steps):
        r = rng.random()
        if r < 0.35:
            log.append(rng.randint(1, 4))
        else:
            view = sorted(snapshots[max(0, len(snapshots) - 1 - rng.randint(0, 3))])
            if len(view) >= 2:
                k = rng.randint(2, len(view))
                log.rewrite(rng.sample(view, k), outputs=rng.randint(1, 2))
        snapshots.append(set(log.live))
    return log
