"""An in-memory Delta log for testing the lineage replay and the repair plan: files hold tuples of rows
(id, value), commits add and remove paths exactly as a log does (a remove of a path that is not live
changes nothing; an add of a removed path brings it back), and no conflict checker stops two rewrites of
the same files. An oracle keeps the rows the data-changing operations alone produce (maintenance never
changes it), per version, so RESTORE has an answer."""

from __future__ import annotations

import json
import random
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass, field

from compactor.formats.delta.duplicates.lineage import REPAIR_COPIES, REPAIR_OF, analyse
from compactor.formats.delta.duplicates.repair_plan import RepairProposal, propose
from compactor.formats.delta.read.log import Commit

Row = tuple[int, int]


@dataclass
class Log:
    commits: list[Commit] = field(default_factory=list)
    content: dict[str, tuple[Row, ...]] = field(default_factory=dict)  # files are immutable
    live: set[str] = field(default_factory=set)
    #: live paths after each version (for RESTORE and stale snapshots)
    live_at: list[frozenset[str]] = field(default_factory=list)
    #: the oracle's rows after each version
    expected_at: list[Counter] = field(default_factory=list)
    next_row: int = 0
    next_file: int = 0

    @property
    def version(self) -> int:
        return len(self.commits) - 1

    @property
    def expected(self) -> Counter:
        return self.expected_at[-1] if self.expected_at else Counter()

    def _new_path(self) -> str:
        self.next_file += 1
        return f"f{self.next_file}.parquet"

    def _add(self, path: str, data_change: bool) -> dict:
        return {"path": path, "dataChange": data_change, "size": 10 * len(self.content[path]),
                "partitionValues": {}, "stats": json.dumps({"numRecords": len(self.content[path])})}

    def _remove(self, path: str, data_change: bool) -> dict:
        return {"path": path, "dataChange": data_change, "deletionTimestamp": 0}

    def commit(self, adds: dict[str, dict], removes: dict[str, dict], info: dict | None = None,
               expected: Counter | None = None) -> int:
        c = Commit(len(self.commits), adds, removes, info or {})
        self.commits.append(c)
        self.live -= set(removes)
        self.live |= set(adds)
        self.live_at.append(frozenset(self.live))
        self.expected_at.append(Counter(self.expected if expected is None else expected))
        return c.version

    def _new_file(self, rows: tuple[Row, ...]) -> str:
        p = self._new_path()
        self.content[p] = rows
        return p

    # ------------------------------------------------------------------ data-changing operations

    def append(self, rows: int = 3) -> str:
        new = tuple((i, 0) for i in range(self.next_row, self.next_row + rows))
        self.next_row += rows
        p = self._new_file(new)
        self.commit({p: self._add(p, True)}, {}, expected=self.expected + Counter(new))
        return p

    def _rewrite_rows(self, change: Callable[[Row], Row | None]) -> int | None:
        """Copy-on-write DELETE/UPDATE: every live file with an affected row is replaced."""
        adds, removes = {}, {}
        for p in sorted(self.live):
            rows = self.content[p]
            changed = [change(r) for r in rows]
            if all(c == r for c, r in zip(changed, rows)):
                continue
            removes[p] = self._remove(p, True)
            kept = tuple(c for c in changed if c is not None)
            if kept:
                q = self._new_file(kept)
                adds[q] = self._add(q, True)
        if not removes:
            return None
        expected = Counter()
        for r, n in self.expected.items():
            c = change(r)
            if c is not None:
                expected[c] += n
        return self.commit(adds, removes, expected=expected)

    def delete(self, pred: Callable[[int], bool]) -> int | None:
        return self._rewrite_rows(lambda r: None if pred(r[0]) else r)

    def update(self, pred: Callable[[int], bool]) -> int | None:
        return self._rewrite_rows(lambda r: (r[0], r[1] + 1) if pred(r[0]) else r)

    def restore(self, version: int) -> int:
        target = self.live_at[version]
        adds = {p: self._add(p, True) for p in sorted(target - self.live)}
        removes = {p: self._remove(p, True) for p in sorted(self.live - target)}
        return self.commit(adds, removes, {"operation": "RESTORE"}, expected=self.expected_at[version])

    # ------------------------------------------------------------------ maintenance

    def conflicts(self, inputs: list[str], read_version: int) -> bool:
        """delta-rs refuses a dataChange=false commit whose inputs a data-changing commit removed after its
        read version (it lets only two dataChange=false removals of one file through: the hazard)."""
        for c in self.commits[read_version + 1:]:
            if c.data_change and set(inputs) & set(c.removes):
                return True
        return False

    def rewrite(self, inputs: list[str], outputs: int = 1) -> int:
        """A compaction of ``inputs`` (as some possibly stale snapshot saw them) into ``outputs`` files."""
        rows = [r for p in inputs for r in self.content[p]]
        adds = {}
        for i in range(outputs):
            p = self._new_file(tuple(rows[i::outputs]))
            adds[p] = self._add(p, False)
        return self.commit(adds, {p: self._remove(p, False) for p in inputs})

    def readd(self, path: str) -> int:
        """Someone re-adds a removed file with dataChange=false (not a repair)."""
        return self.commit({path: self._add(path, False)}, {})

    def rows(self) -> Counter:
        return Counter(r for p in self.live for r in self.content[p])

    def duplicated(self) -> list[int]:
        c = Counter(r[0] for r in self.rows().elements())
        return sorted(i for i, n in c.items() if n != 1)

    # ------------------------------------------------------------------ repairs

    def content_check(self, plan: RepairProposal) -> str | None:
        """What apply proves from the files before committing a repair (formats/delta/duplicates/repair.py)."""
        for a in plan.anomalies:  # (2) the excess files were not live before the anomaly (delta-rs' snapshot)
            c = self.commits[a]
            if c.info.get(REPAIR_OF) is None and any(p in self.live_at[a - 1] for v, p in plan.excess if v == a):
                return f"version {a}: an excess file was live before it"
        removed = Counter(r for p in plan.remove for r in self.content[p])
        restored = Counter(r for p in plan.restore for r in self.content[p])
        excess = Counter(r for _, p in plan.excess for r in self.content[p])
        if removed != restored + excess or restored + excess - removed:
            return "rows removed != rows restored + excess"
        kept = Counter(r for p in (*plan.keep, *plan.restore) for r in self.content[p])
        for a in plan.anomalies:
            mine = Counter(r for v, p in plan.excess if v == a and p in plan.checked for r in self.content[p])
            if mine - kept:
                return f"the other copy of version {a}'s rows is not whole"
        return None

    def apply_repair(self, plan: RepairProposal, *, copies: bool = False) -> int:
        adds, copy_of = {}, {}
        for p in plan.restore:
            if copies:
                q = self._new_file(self.content[p])
                copy_of[q] = p
                adds[q] = self._add(q, False)
            else:
                adds[p] = self._add(p, False)
        info = {REPAIR_OF: ",".join(map(str, plan.anomalies))}
        if copy_of:
            info[REPAIR_COPIES] = json.dumps(copy_of)
        return self.commit(adds, {p: self._remove(p, False) for p in plan.remove}, info)

    def repair(self, *, copies: bool = False) -> int | None:
        """Plan, check and commit a repair as compactor does; None when there is nothing to repair."""
        lineage = analyse(self.commits)
        plan = propose(lineage)
        if plan is None:
            return None
        assert plan.repairable, plan.problems
        problem = self.content_check(plan)
        assert problem is None, problem
        return self.apply_repair(plan, copies=copies)


def random_history(rng: random.Random, steps: int = 30) -> Log:
    """Appends and compactions, each compaction planned on a snapshot up to a few versions old."""
    log = Log()
    for _ in range(4):
        log.append()
    for _ in range(steps):
        r = rng.random()
        if r < 0.35:
            log.append(rng.randint(1, 4))
        else:
            read = max(0, log.version - rng.randint(0, 3))
            view = sorted(log.live_at[read])
            if len(view) >= 2:
                inputs = rng.sample(view, rng.randint(2, len(view)))
                if not log.conflicts(inputs, read):
                    log.rewrite(inputs, outputs=rng.randint(1, 2))
    return log
