"""compactor's side of the delta-spark fuzzer (tests/fuzz/spark_history.py): the policies its plans are made
with, and what each of its commits must be, read from the log's JSON (spark_checks.LogReplay's commits) and
from delta-spark's change feed, never through compactor's code.

A plan's policy sometimes enables ``compaction.purge`` (random ``min_deleted_rows`` / ``min_deleted_ratio``)
and sets ``compaction.triggers.max_deleted_rows_ratio``; a purge-only policy turns compaction off. After every
apply, each commit compactor made (its commitInfo names the run's action: ``compactor.action`` =
``<run>:<table>:<index>`` or ``<first>-<last>`` for a commit group):

- removes only files the plan's actions listed as inputs; REORG ... APPLY (PURGE) also rewrites files of the
  partition the plan did not list (files holding a dropped column, or the change feed's columns), which the
  purge's result must report (its note), and a revert of compactor's own duplicate commit removes that run's
  own adds;
- adds no file with a deletion vector (a purged file's replacement, a compacted file's), and every add and
  remove has ``dataChange`` false; on a table with the change feed, delta-spark's feed shows no row of it;
- keeps the rows: rows added (their statistics) == rows the removed files held less their deletion vectors'
  cardinality (the repair of rows live twice excepted: it takes extra copies out).
"""

from __future__ import annotations

import datetime as dt
import json
import random
from collections import Counter
from dataclasses import dataclass
from pathlib import Path
from typing import Any
from urllib.parse import unquote

from compactor.formats.delta import FORMAT
from compactor.models.results import RunResults
from compactor.models.table import TableLocation
from compactor.planning.plan import Plan
from compactor.policy.model import Compaction, Purge, TablePolicy, Triggers
from compactor.project.model import Target
from compactor.tasks.plan import build_plan
from tests.fuzz.spark_checks import CommitFacts, Failure, LogReplay

MARKER = "compactor.action"


@dataclass(frozen=True)
class PolicyChoice:
    """What a plan's policy says beyond the fuzzer's fixed sizes: the purge and the deletion ratio trigger."""

    purge: bool = False
    min_deleted_rows: int | None = None
    min_deleted_ratio: float = 0.05
    max_deleted_rows_ratio: float | None = None
    #: compaction of small files on (off: a purge-only policy)
    compaction: bool = True

    @classmethod
    def random(cls, rng: random.Random, *, purge: bool | None = None) -> PolicyChoice:
        """Half the plans purge (``purge`` forces it on or off), a third of those purge only."""
        if not (rng.random() < 0.5 if purge is None else purge):
            return cls(max_deleted_rows_ratio=rng.choice([None, None, 0.0, 0.3]))
        return cls(purge=True, min_deleted_rows=rng.choice([None, None, 0, 3]),
                   min_deleted_ratio=rng.choice([0.0, 0.05, 0.05, 0.3]),
                   max_deleted_rows_ratio=rng.choice([None, 0.0, 0.05, 0.5]), compaction=rng.random() < 0.67)

    def __str__(self) -> str:
        said = [] if self.compaction else ["compaction off"]
        if self.purge:
            said.append(f"purge rows>{self.min_deleted_rows} ratio>{self.min_deleted_ratio}")
        if self.max_deleted_rows_ratio is not None:
            said.append(f"max_deleted_rows_ratio {self.max_deleted_rows_ratio}")
        return ", ".join(said) or "default"

    def policy(self, path: Path, method: str, target_size: int = 1 << 20) -> TablePolicy:
        return TablePolicy(name="t", path=str(path), compaction=Compaction(
            enabled=self.compaction, target_file_size=target_size, min_file_size=target_size // 2, method=method,  # type: ignore[arg-type]
            triggers=Triggers(min_input_files=2, max_deleted_rows_ratio=self.max_deleted_rows_ratio),
            purge=Purge(enabled=self.purge, min_deleted_rows=self.min_deleted_rows,
                        min_deleted_ratio=self.min_deleted_ratio)))


def plan_with(choice: PolicyChoice, path: Path, engine: str, method: str) -> Plan:
    """The plan `compactor plan` makes for ``choice``'s policy (the state read as it reads it)."""
    policy = choice.policy(path, method)
    state = FORMAT.read_state(TableLocation(str(path)), policy)
    return build_plan([policy], {"t": state}, now=dt.datetime.now(dt.UTC), target=Target(engine=engine),  # type: ignore[arg-type]
                      project_name="tests")


def _indices(marker: str) -> list[int]:
    key = marker.rsplit(":", 1)[-1]
    first, _, last = key.partition("-")
    return list(range(int(first), int(last or first) + 1))


def _rows(add: dict[str, Any] | None) -> int | None:
    stats = json.loads(add.get("stats") or "{}") if add is not None else {}
    return stats.get("numRecords") if isinstance(stats, dict) else None


def compactor_commits(replay: LogReplay, after: int) -> dict[int, tuple[CommitFacts, str]]:
    """Version -> (commit, its action marker) of compactor's commits after version ``after``."""
    out = {}
    for v in range(after + 1, replay.version + 1):
        facts = replay.commits[v]
        marker = facts.metadata(MARKER)
        if marker is not None:
            out[v] = (facts, marker)
    return out


def check_commits(replay: LogReplay, after: int, plan: Plan, run: RunResults | None) -> Counter[str]:
    """The module docstring's rules on compactor's commits since version ``after`` (``run`` None: killed);
    returns what they did, counted (purged files, files with deletion vectors rewritten)."""
    (tp,) = plan.tables
    did: Counter[str] = Counter()
    own_adds: set[str] = set()
    own_removes: set[str] = set()
    results = run.results if run is not None and len(run.results) == len(tp.actions) else None
    for v, (facts, marker) in sorted(compactor_commits(replay, after).items()):
        idx = _indices(marker)
        actions = [tp.actions[i] for i in idx if i < len(tp.actions)]
        types = {a.type for a in actions}
        planned = {unquote(p) for a in actions for p in getattr(a, "input_paths", ())}
        removed = [unquote(r["path"]) for r, _ in facts.removes]
        extra = sorted(p for p in set(removed) - planned - own_adds)
        if extra and types == {"purge"}:
            notes = " ".join((results[i].details.note or "") for i in idx) if results else ""
            if f"also rewrote {len(extra)} file(s)" not in notes:
                raise Failure(f"commit {v} (purge): REORG removed {len(extra)} unplanned file(s) its result does "
                              f"not report ({notes!r}): {extra[:3]}")
            did["purge: unplanned files REORG rewrote, reported"] += len(extra)
        elif extra:
            raise Failure(f"commit {v} ({', '.join(sorted(types))}) removed {len(extra)} file(s) no planned action "
                          f"listed: {extra[:3]}")
        # a revert of compactor's own duplicate commit re-adds the inputs it removed, vectors and all
        with_dv = [a["path"] for a in facts.adds if a.get("deletionVector") and unquote(a["path"]) not in own_removes]
        if with_dv and "repair" not in types:
            raise Failure(f"commit {v} ({', '.join(sorted(types))}) added {len(with_dv)} file(s) with a deletion "
                          f"vector: {with_dv[:3]}")
        changing = [a["path"] for a in facts.adds if a.get("dataChange", True)] + \
            [r["path"] for r, _ in facts.removes if r.get("dataChange", True)]
        if changing:
            raise Failure(f"commit {v}: {len(changing)} action(s) with dataChange true: {changing[:3]}")
        if "repair" not in types:
            _rows_kept(v, facts)
        own_adds |= {unquote(a["path"]) for a in facts.adds}
        own_removes |= set(removed)
        for t in types:
            did[f"{t} commits checked"] += 1
        dv_removed = sum(1 for r, _ in facts.removes if r.get("deletionVector"))
        if dv_removed:
            did[f"{'/'.join(sorted(types))}: files with deletion vectors rewritten"] += dv_removed
    return did


def _live_rows(add: dict[str, Any] | None, dv: dict[str, Any] | None) -> int | None:
    n = _rows(add)
    return None if n is None else n - (dv or {}).get("cardinality", 0)


def _rows_kept(v: int, facts: CommitFacts) -> None:
    added = [_live_rows(a, a.get("deletionVector")) for a in facts.adds]
    held = [_live_rows(add, (add or r).get("deletionVector")) for r, add in facts.removes]
    if None in added or None in held:
        return  # a file without statistics: the oracle's read is the check
    if sum(a for a in added if a is not None) != sum(h for h in held if h is not None):
        raise Failure(f"commit {v} added {sum(a for a in added if a is not None)} row(s) for the "
                      f"{sum(h for h in held if h is not None)} its {len(held)} removed file(s) held")


def feed_of(spark: Any, uri: str, versions: list[int]) -> int:
    """Rows delta-spark's change feed shows for commits ``versions`` (one read over their range)."""
    if not versions:
        return 0
    rows = spark.sql(f"SELECT count(*) FROM table_changes_by_path('{uri}', {min(versions)}, {max(versions)}) "
                     f"WHERE _commit_version IN ({', '.join(map(str, versions))})").collect()
    return int(rows[0][0])
