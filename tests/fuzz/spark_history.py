"""Seeded random histories written by delta-spark (issue 36), interleaved with compactor on both engines,
with an oracle of the rows each version holds.

delta-rs (tests/fuzz/history.py) never writes deletion vectors, column mapping, row tracking, change data
files, clustering or v2 checkpoints; delta-spark writes all of them. A table is created with a random set of
them and then takes random steps (``OPS``):

- delta-spark: INSERT, DELETE, UPDATE, MERGE (upserts and deletes), RESTORE, OPTIMIZE (ZORDER BY or a
  partition's WHERE where the table allows), REORG ... APPLY (PURGE), VACUUM at the table's retention, a
  checkpoint, and ALTER TABLE: deletion vectors and the change data feed on and off, column mapping (name
  mode) on, RENAME COLUMN, ADD/DROP COLUMN, row tracking on, CLUSTER BY, ``delta.checkpointPolicy=v2``, the
  table's ``delta.deletedFileRetentionDuration`` at 0 or 1 hour;
- compactor: plan (applied later: stale), apply on the local engine and on the spark engine in-process
  (``compaction.method`` auto, rewrite or optimize), apply killed at a crash point (runtime/faults.py), and
  its VACUUM through apply on either engine (listed now, or with a DELETE or an OPTIMIZE committing between
  apply's listing and its delete);
- every file but the log's and compactor's own aged by two hours (``os.utime``): older than the retention.

The oracle is a dict id -> value per table version; compactor, OPTIMIZE, REORG and VACUUM never change it;
RESTORE brings back the rows of the version restored (never to before a VACUUM). Nothing reads the table
through compactor's code: the checks (tests/fuzz/spark_checks.py) use delta-spark's reads, its change feed,
its snapshot and its VACUUM's dry run, and the log's JSON replayed there.
"""

from __future__ import annotations

import os
import random
import re
import time
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from compactor.engines.spark import SparkEngine
from compactor.models.results import RunResults
from compactor.project.model import Target
from compactor.tasks.apply import apply_plan
from tests.fuzz.history import CRASH_POINTS, Killed, apply_killable, vacuum_through_apply
from tests.fuzz.spark_checks import Checks, Failure, Meta, file_kind
from tests.fuzz.spark_compactor import PolicyChoice, check_commits, compactor_commits, feed_of, plan_with

#: what the histories need of the shared session (restored after): delta-spark's VACUUM at a retention under
#: its 7-day check, time travel and change feed reads past a zero retention, and VACUUM's listing of a tiny
#: table in a few tasks (Delta's default is 10,000: tens of seconds a VACUUM)
SESSION_CONF = {
    "spark.databricks.delta.retentionDurationCheck.enabled": "false",
    "spark.databricks.delta.vacuum.enforceTimeTravelWithinDeletedFileRetentionDuration": "false",
    "spark.sql.sources.parallelPartitionDiscovery.parallelism": "2",
    # tiny tables: one task where Spark would shuffle into two (a tenth less CPU a step)
    "spark.sql.shuffle.partitions": "1",
    "spark.databricks.delta.snapshotPartitions": "1",
}

#: refusals that are allowed outcomes (the table left as it was), each a name and the pattern of its message:
#: compactor names the feature or the change that stops it
REFUSALS = {
    "delta-rs cannot write the table's features": r"cannot be written by delta-rs|delta-rs cannot write tables with",
    "a feature only delta-spark's OPTIMIZE honours": r"(^|: )(rowTracking|clustering|liquid)[,:] |compactor's commit writer "
                                                      r"does not honour",
    "column mapping": r"columnMapping",
    "deletion vectors": r"deletion ?vectors|deletionVectors",
    "the vacuum's list grew since the plan": r"VACUUM would now delete .* the reviewed plan did not list",
    "the table's retention is above the vacuum's": r"is below the table's delta\.deletedFileRetentionDuration",
}

Rows = dict[int, int]


@dataclass
class SparkHistory:
    spark: Any
    path: Path
    rng: random.Random
    #: oracle: version -> rows; the metadata the log holds per version
    oracle: dict[int, Rows] = field(default_factory=dict)
    metas: dict[int, Meta] = field(default_factory=dict)
    log: list[str] = field(default_factory=list)
    next_id: int = 0
    #: RESTORE and the change feed never go below this version (a VACUUM ran after it)
    floor: int = 0
    #: the change feed's rows are checked from this version on (None: the feed is off, or was since)
    cdf_from: int | None = None
    #: plans made earlier, applied later: (engine, method, plan)
    plans: list[tuple[str, str, Any]] = field(default_factory=list)
    refusals: Counter[str] = field(default_factory=Counter)
    spark_refusals: Counter[str] = field(default_factory=Counter)
    #: what compactor did: actions that succeeded per engine and method, vacuums, kills
    done: Counter[str] = field(default_factory=Counter)
    #: compactor's successful actions by the table's features at the time
    committed_on: Counter[str] = field(default_factory=Counter)
    checks: Checks = field(init=False)
    _verified: tuple[int, frozenset[str]] | None = None
    _fed: tuple[int, int] | None = None

    def __post_init__(self) -> None:
        self.checks = Checks(self.spark, self.path)

    # ------------------------------------------------------------------ what the fuzzer knows

    @property
    def uri(self) -> str:
        return str(self.path)

    @property
    def version(self) -> int:
        return self.checks.replay.update().version

    def rows_at(self, version: int) -> Rows:
        return self.oracle[max(v for v in self.oracle if v <= version)]

    def meta_at(self, version: int) -> Meta:
        return self.metas[max(v for v in self.metas if v <= version)]

    @property
    def rows(self) -> Rows:
        return self.rows_at(self.version)

    @property
    def meta(self) -> Meta:
        return self.meta_at(self.version)

    def _after(self, rows: Rows) -> None:
        """Record the rows of the version now, and its metadata as the log holds it."""
        v = self.version
        before = self.meta  # the latest recorded before this version
        self.oracle[v] = dict(rows)
        self.metas[v] = meta = self.checks.replay.update().meta()
        if not meta.cdf:
            self.cdf_from = None
        elif self.cdf_from is None or (before.value, before.note) != (meta.value, meta.note):
            self.cdf_from = v + 1  # turned on here; or the columns changed (no feed read across a rename)

    def sql(self, statement: str) -> list[Any]:
        return self.spark.sql(statement).collect()

    def maybe(self, what: str, statement: str) -> bool:
        """A statement delta-spark may refuse (a feature change a table kind does not allow): then nothing
        is committed, and the refusal is counted."""
        v = self.version
        try:
            self.sql(statement)
            return True
        except Exception as e:  # noqa: BLE001 - delta-spark refused it: checked to have committed nothing
            if self.version != v:
                raise Failure(f"{what} failed after committing: {e}") from e
            name = error_class(e)
            self.spark_refusals[f"{what}: {name}"] += 1
            self.log.append(f"{what}: refused by delta-spark ({name})")
            return False

    # ------------------------------------------------------------------ the table

    def create(self) -> None:
        rng = self.rng
        layout = rng.choices(["partitioned", "clustered", "none"], [2, 1, 1])[0]
        props = {"delta.enableDeletionVectors": str(rng.random() < 0.6).lower(),
                 "delta.deletedFileRetentionDuration": rng.choice(["interval 0 hours"] * 3 + ["interval 1 hours"])}
        for key, value, p in (("delta.enableChangeDataFeed", "true", 0.4), ("delta.columnMapping.mode", "name", 0.25),
                              ("delta.enableRowTracking", "true", 0.15), ("delta.checkpointPolicy", "v2", 0.25),
                              ("delta.checkpointInterval", str(rng.randint(3, 5)), 0.3)):
            if rng.random() < p:
                props[key] = value
        sql = f"CREATE TABLE delta.`{self.uri}` (p INT, id BIGINT, val BIGINT) USING delta"
        sql += {"partitioned": " PARTITIONED BY (p)", "clustered": " CLUSTER BY (id)", "none": ""}[layout]
        sql += " TBLPROPERTIES (" + ", ".join(f"'{k}' = '{v}'" for k, v in sorted(props.items())) + ")"
        self.sql(sql)
        self.metas[0] = self.checks.replay.update().meta()
        self.oracle[0] = {}
        self.cdf_from = 1 if self.metas[0].cdf else None
        self.log.append(f"create {layout} {props}")
        self.checks.start()
        self.append()

    # ------------------------------------------------------------------ delta-spark's data changes

    def append(self) -> None:
        k, files = self.rng.randint(2, 6), 1 if self.rng.random() < 0.75 else 2
        a, b = self.next_id, self.next_id + k
        self.next_id = b
        self.sql(f"INSERT INTO delta.`{self.uri}` (p, id, {self.meta.value}) SELECT CAST(id % 2 AS INT), id, 0 "
                 f"FROM range({a}, {b}, 1, {files})")
        self._after({**self.rows, **{i: 0 for i in range(a, b)}})
        self.log.append(f"insert ids {a}..{b - 1} in {files} task(s)")

    def delete(self) -> None:
        c = self.rng.randint(0, 6)
        self.sql(f"DELETE FROM delta.`{self.uri}` WHERE id % 7 = {c}")
        self._after({i: v for i, v in self.rows.items() if i % 7 != c})
        self.log.append(f"delete id % 7 = {c}")

    def update(self) -> None:
        c, col = self.rng.randint(0, 4), self.meta.value
        self.sql(f"UPDATE delta.`{self.uri}` SET {col} = {col} + 1 WHERE id % 5 = {c}")
        self._after({i: v + 1 if i % 5 == c else v for i, v in self.rows.items()})
        self.log.append(f"update id % 5 = {c}")

    def merge(self) -> None:
        ids = self.rng.sample(range(self.next_id + 2), 3)
        drop = {i for i in ids if self.rng.random() < 0.3}
        source = ", ".join(f"({i % 2}, {i}L, 7L, {str(i in drop).lower()})" for i in ids)
        col = self.meta.value
        self.sql(f"MERGE INTO delta.`{self.uri}` t USING (SELECT * FROM VALUES {source} AS s(p, id, v, del)) s "
                 f"ON t.id = s.id WHEN MATCHED AND s.del THEN DELETE WHEN MATCHED THEN UPDATE SET t.{col} = s.v "
                 f"WHEN NOT MATCHED AND NOT s.del THEN INSERT (p, id, {col}) VALUES (s.p, s.id, s.v)")
        rows = dict(self.rows)
        for i in ids:
            if i in drop:
                rows.pop(i, None)
            else:
                rows[i] = 7
        self.next_id = max(self.next_id, max(ids) + 1)
        self._after(rows)
        self.log.append(f"merge {ids}, deleting {sorted(drop)}")

    def restore(self) -> None:
        self.verify_feed()
        if self.version <= self.floor:
            return
        v = self.rng.randint(self.floor, self.version - 1)
        rows = self.rows_at(v)
        if self.maybe(f"restore {v}", f"RESTORE TABLE delta.`{self.uri}` TO VERSION AS OF {v}"):
            self._after(rows)
            if self.cdf_from is not None:
                self.cdf_from = self.version + 1
            self.log.append(f"restore {v}")

    # ------------------------------------------------------------------ delta-spark's maintenance

    def optimize(self) -> None:
        how = ""
        if not self.meta.clustered and self.rng.random() < 0.3:
            how = " ZORDER BY (id)"
        elif self.meta.partitioned and self.rng.random() < 0.3:
            how = f" WHERE p = {self.rng.randint(0, 1)}"
        if self.maybe(f"OPTIMIZE{how}", f"OPTIMIZE delta.`{self.uri}`{how}"):
            self._after(self.rows)
            self.log.append(f"delta-spark OPTIMIZE{how}")

    def purge(self) -> None:
        if self.maybe("REORG PURGE", f"REORG TABLE delta.`{self.uri}` APPLY (PURGE)"):
            self._after(self.rows)
            self.log.append("delta-spark REORG ... APPLY (PURGE)")

    def vacuum(self) -> None:
        self.verify_feed()
        self.sql(f"VACUUM delta.`{self.uri}`")
        self._after(self.rows)
        self.floor = self.version
        self._feed_after_vacuum()
        self.checks.vacuumed()
        self.log.append(f"delta-spark VACUUM ({self.meta.retention_h}h)")

    def _feed_after_vacuum(self) -> None:
        if self.cdf_from is not None:
            self.cdf_from = max(self.cdf_from, self.version + 1)

    def checkpoint(self) -> None:
        jvm = self.spark._jvm
        jvm.org.apache.spark.sql.delta.DeltaLog.forTable(self.spark._jsparkSession, self.uri).checkpoint()
        self.log.append("checkpoint")

    def alter(self) -> None:
        """One table feature or setting changed by ALTER TABLE."""
        m, rng = self.meta, self.rng
        #: (weight, what, clause): the reversible changes often, the features that stay once on less
        choices: list[tuple[float, str, str]] = [
            (2, "deletion vectors " + ("off" if m.dv else "on"),
             f"SET TBLPROPERTIES ('delta.enableDeletionVectors' = '{str(not m.dv).lower()}')"),
            (2, "change data feed " + ("off" if m.cdf else "on"),
             f"SET TBLPROPERTIES ('delta.enableChangeDataFeed' = '{str(not m.cdf).lower()}')"),
            (1.5, "retention " + ("1h" if m.retention_h == 0 else "0h"),
             "SET TBLPROPERTIES ('delta.deletedFileRetentionDuration' = "
             + ("'interval 1 hours')" if m.retention_h == 0 else "'interval 0 hours')")),
            (0.5, "row tracking on", "SET TBLPROPERTIES ('delta.enableRowTracking' = 'true')"),
            (0.5, "v2 checkpoints", "SET TBLPROPERTIES ('delta.checkpointPolicy' = 'v2')"),
        ]
        if m.colmap:
            new = f"val{self.rng.randint(1, 99)}" if m.value == "val" else "val"
            choices.append((2, f"rename {m.value} to {new}", f"RENAME COLUMN {m.value} TO {new}"))
            if m.note:
                choices.append((1, "drop column note", "DROP COLUMN note"))
        else:
            choices.append((0.5, "column mapping on", "SET TBLPROPERTIES ('delta.columnMapping.mode' = 'name')"))
        if not m.note:
            choices.append((1, "add column note", "ADD COLUMNS (note STRING)"))
        if not m.partitioned:
            choices.append((0.5, "cluster by none", "CLUSTER BY NONE") if m.clustered else
                           (0.5, "cluster by id", "CLUSTER BY (id)"))
        _, what, clause = rng.choices(choices, [c[0] for c in choices])[0]
        if what.startswith(("change data feed", "rename", "add column", "drop column")):
            self.verify_feed()  # the feed's range ends here
        if self.maybe(what, f"ALTER TABLE delta.`{self.uri}` {clause}"):
            self._after(self.rows)
            self.log.append(what)

    def age(self) -> None:
        """Every file but the log's and compactor's own two hours old: older than any retention here."""
        old = time.time() - 2 * 3600
        for f in self.checks.data_files():
            os.utime(self.path / f, (old, old))
        self.log.append("files aged 2h")

    # ------------------------------------------------------------------ compactor

    def _method(self, engine: str) -> str:
        return self.rng.choice(["auto", "auto", "rewrite", "optimize"]) if engine == "spark" else "auto"

    def plan(self) -> None:
        engine = self.rng.choice(["local", "spark"])
        method = self._method(engine)
        choice = PolicyChoice.random(self.rng)
        self.plans.append((engine, method, self._plan(engine, method, choice)))
        self.log.append(f"compactor plans ({engine}, {method}, {choice})")

    def _plan(self, engine: str, method: str, choice: PolicyChoice = PolicyChoice()) -> Any:
        return plan_with(choice, self.path, engine, "rewrite" if method == "auto" and engine == "local" else method)

    def apply(self, engine: str | None = None, crash_at: str | None = None, *, racer: str | None = None) -> None:
        """compactor's apply of a plan made earlier or now (``racer``: a DELETE, UPDATE or MERGE between a
        purging plan and its apply)."""
        if self.plans and racer is None and self.rng.random() < 0.5:
            engine, method, plan = self.plans.pop(0)
            when = "planned earlier"
        else:
            engine = engine or self.rng.choice(["local", "spark"])
            method = self._method(engine)
            choice = PolicyChoice.random(self.rng, purge=True if racer else None)
            plan = self._plan(engine, method, choice)
            when = f"planned now: {choice}"
        if racer is not None:
            getattr(self, racer)()
            when += f", then {self.log[-1]}"
        target = Target(engine=engine, commit_every_bins=self.rng.choice([1, 100]))  # type: ignore[arg-type]
        before = self.checks.stored()
        v, rows = self.version, self.rows
        line = self.say(f"compactor apply ({engine}, {method}, {when}"
                        + (f", armed at {crash_at})" if crash_at else ")"))
        run = apply_killable(lambda: apply_plan(plan, target=target, watch_s=0,
                                                engine=SparkEngine(target) if engine == "spark" else None),
                             crash_at, self.path)
        if run is None:
            self.checks.killed(before)
            self.done[f"killed at {crash_at}"] += 1
            self.log[line] += ": killed there"
        else:
            self.log[line] += ": " + self._outcome(f"{engine} {method}", plan, run, before, v)
        self._after(rows)
        self._check_commits(v, plan, run)

    def race_purge(self) -> None:
        self.apply(racer=self.rng.choice(["delete", "update", "merge"]))

    def _check_commits(self, version: int, plan: Any, run: RunResults | None) -> None:
        """compactor's commits since ``version`` (spark_compactor.check_commits), and the change feed over them."""
        replay = self.checks.replay.update()
        engine = plan.tables[0].engine
        self.done.update({f"{engine} {k}": n for k, n in check_commits(replay, version, plan, run).items()})
        ours = sorted(compactor_commits(replay, version))
        if ours and self.cdf_from is not None and self.cdf_from <= ours[0]:
            n = feed_of(self.spark, self.uri, ours)
            if n:
                raise Failure(f"the change feed shows {n} row(s) of compactor's commit(s) {ours}")
            self.done["change feed of compactor's commits checked"] += 1

    def say(self, what: str) -> int:
        """Log a step before it runs (a failure shows where); returns its line, for the outcome."""
        self.log.append(what)
        return len(self.log) - 1

    def apply_killed(self) -> None:
        self.apply(crash_at=self.rng.choice(CRASH_POINTS))

    def _outcome(self, label: str, plan: Any, run: RunResults, before: dict[str, tuple[int, float]], version: int) -> str:
        """What an apply did, its refusals counted: every action succeeded, was stale, or was refused in an
        allowed way; when none succeeded, nothing changed."""
        (tp,) = plan.tables
        said = []
        engine = label.split()[0]
        for s in tp.skipped:
            if s.reason == "unsupported":
                said.append(self.refused("plan: " + s.message))
            elif s.reason in ("purge_needs_spark", "below_purge_threshold"):
                self.done[f"{engine}: partitions skipped, {s.reason}"] += 1
        if tp.error:
            said.append(self.refused("plan: " + tp.error))
        ok = 0
        for r in run.results:
            if r.status == "success":
                ok += 1
                if r.type != "compact":
                    self.done[f"{engine} {r.type}"] += 1
            elif r.status == "stale":
                self.refusals["stale plan"] += 1
                said.append("stale")
            elif r.type == "plan":
                continue  # the table's plan error, counted above
            else:
                said.append(self.refused(f"{r.type} {r.status}: {r.error}"))
        if not ok:
            self.checks.unchanged(before, version)
        self.done[label] += ok
        for feature in self.meta.features() if ok else ():
            self.committed_on[f"{engine}: {feature}"] += ok
        return f"{ok} succeeded" + (f"; {'; '.join(said)}" if said else "")

    def refused(self, message: str) -> str:
        """The name of an allowed refusal, counted; a Failure for any other error."""
        for name, pattern in REFUSALS.items():
            if re.search(pattern, message):
                self.refusals[name] += 1
                return f"refused ({name})"
        raise Failure(f"compactor failed in a way no allowed refusal explains: {message}")

    def compactor_vacuum(self, engines: tuple[str, ...] = ("local", "spark")) -> None:
        """compactor's VACUUM through apply at the table's retention: it may delete only files delta-spark's own
        VACUUM would delete (its dry run right before), and files the plan listed."""
        engine = self.rng.choice(engines)
        hours = self.meta.retention_h
        if hours > 1:
            return
        how = self.rng.choice(["now", "now", "a DELETE racing the delete", "an OPTIMIZE racing the delete",
                               "killed after its listing"])
        self.verify_feed()
        deletable = self.checks.vacuum_listing()

        def race() -> None:
            if how == "killed after its listing":
                raise Killed("delta.vacuum_listed")
            if how.startswith("a DELETE"):
                c = self.rng.randint(0, 6)
                self.sql(f"DELETE FROM delta.`{self.uri}` WHERE id % 7 = {c}")
                self._after({i: v for i, v in self.rows.items() if i % 7 != c})
                self.log.append(f"  (its race: delete id % 7 = {c})")
            else:
                self.sql(f"OPTIMIZE delta.`{self.uri}`")

        target = Target(engine=engine)  # type: ignore[arg-type]
        before = self.checks.stored()
        v = self.version
        line = self.say(f"compactor VACUUM ({engine}, {hours}h, {how})")
        done = apply_killable(lambda: vacuum_through_apply(
            self.path, race=None if how == "now" else race, target=target, retention_hours=hours,
            engine=SparkEngine(target) if engine == "spark" else None,
            partition_columns=("p",) if self.meta.partitioned else ()), None, self.path)
        if done is None:
            self.log[line] += ": killed"
            self.done["killed at delta.vacuum_listed"] += 1
            self.checks.unchanged(before, v)  # killed before its delete: nothing deleted
            return
        _, r, deleted = done
        kept = sorted(deleted - deletable)
        if kept:
            kinds = Counter(file_kind(f) for f in kept)
            raise Failure(f"compactor's VACUUM ({engine}) deleted {len(kept)} file(s) delta-spark's VACUUM keeps "
                          f"({', '.join(f'{n} {k}' for k, n in sorted(kinds.items()))}): "
                          f"{[next(f for f in kept if file_kind(f) == k) for k in sorted(kinds)]}")
        if r.status == "success":
            self.log[line] += f": {len(deleted)} deleted"
            self.done[f"vacuum {engine}: {'deleted files' if deleted else 'nothing to delete'}"] += 1
        else:
            self.log[line] += f": {self.refused(f'vacuum {r.status}: {r.error}')}"
            if how == "now":
                self.checks.unchanged(before, v)
        self._after(self.rows)
        self.floor = self.version
        self._feed_after_vacuum()
        self.checks.vacuumed()

    # ------------------------------------------------------------------ at the end of each history

    def verify(self) -> None:
        """delta-spark reads exactly the oracle's rows (read again only when the version or the files
        changed since the last read)."""
        seen = (self.version, frozenset(self.checks.data_files()))
        if seen == self._verified:
            return
        col = self.meta.value
        got = Counter(tuple(r) for r in self.spark.read.format("delta").load(self.uri).select("id", col).collect())
        expected = Counter(self.rows.items())
        if got != expected:
            raise Failure(f"delta-spark reads other rows than the oracle's: missing {sorted((expected - got).elements())[:5]}, "
                          f"extra {sorted((got - expected).elements())[:5]}")
        self._verified = seen

    def verify_feed(self) -> None:
        """delta-spark's change feed since ``cdf_from`` sums to the rows' change (inserts and post-images
        less deletes and pre-images): compactor's commits add no change, and no change data file is missing.
        Each range is read once: before a step that moves ``cdf_from`` on (a VACUUM, RESTORE, ALTER), and at
        the end of the table."""
        if self.cdf_from is None or self.cdf_from > self.version or (self.cdf_from, self.version) == self._fed:
            return
        net: Counter[tuple[int, int]] = Counter()
        sign = {"insert": 1, "update_postimage": 1, "delete": -1, "update_preimage": -1}
        for i, value, kind in self.sql(f"SELECT id, {self.meta.value}, _change_type FROM table_changes_by_path("
                                       f"'{self.uri}', {self.cdf_from}, {self.version})"):
            net[(i, value)] += sign[kind]
        want = Counter(self.rows.items())
        want.subtract(Counter(self.rows_at(self.cdf_from - 1).items()))
        if +net != +want or -net != -want:
            raise Failure(f"the change feed of versions {self.cdf_from}..{self.version} sums to {dict(+net)} less "
                          f"{dict(-net)}; the rows changed by {dict(+want)} less {dict(-want)}")
        self._fed = (self.cdf_from, self.version)
        self.done["change feed ranges checked"] += 1

    def settle(self, engines: tuple[str, ...] = ("local", "spark")) -> None:
        """What a schedule does on each engine with the default method: plan, apply, plan again. The
        second plan has nothing left to compact (every table kind converges), or compactor refuses. One
        exception, counted: a partition the plan purged may hold the purge's new small file beside other small
        files (the compaction's output, or a lone small file no bin took), which the next plan compacts; the
        plan after that has nothing."""
        for engine in engines:
            choice = PolicyChoice.random(self.rng)
            plan = self._plan(engine, "auto", choice)
            for round_ in (1, 2):
                if not plan.tables[0].actions:
                    break
                run = self._settle_apply(engine, choice, plan)
                again = self._plan(engine, "auto", choice)
                left = [a for a in again.tables[0].actions if a.type != "vacuum"]
                if not left or not all(r.status == "success" for r in run.results):
                    break
                if round_ == 1 and {a.type for a in left} == {"compact"} and \
                        {_key(a) for a in left} <= {_key(a) for a in plan.tables[0].actions if a.type == "purge"}:
                    self.done["settle: a purged partition's new file compacted by the next plan"] += 1
                    plan = again
                    continue
                raise Failure(f"{engine}: compacted, and the next plan compacts again ({len(left)} action(s)): "
                              f"no convergence; applied {_actions(plan)}, then planned {_actions(again)}")

    def _settle_apply(self, engine: str, choice: PolicyChoice, plan: Any) -> RunResults:
        target = Target(engine=engine)  # type: ignore[arg-type]
        before, v = self.checks.stored(), self.version
        line = self.say(f"settle: compactor apply ({engine}, auto, {choice})")
        run = apply_plan(plan, target=target, watch_s=0, engine=SparkEngine(target) if engine == "spark" else None)
        self.log[line] += ": " + self._outcome(f"{engine} auto (settle)", plan, run, before, v)
        self._after(self.rows)
        self._check_commits(v, plan, run)
        self.checks.step(self.meta.retention_h)
        return run


def _key(action: Any) -> tuple[tuple[str, Any], ...]:
    return tuple(sorted(action.partition.items()))


def _actions(plan: Any) -> list[str]:
    return [f"{a.type} {dict(a.partition)} {a.input_files} file(s) -> {a.expected_output_files}"
            for a in plan.tables[0].actions]


def error_class(e: BaseException) -> str:
    """A delta-spark error's class, e.g. DELTA_UNSUPPORTED_..., or the first words of its message."""
    m = re.search(r"\[([A-Z_]{6,})[.\]]", str(e))
    return m.group(1) if m else " ".join(str(e).split()[:6])


#: weights: compactor's steps (what the fuzzer is for) and delta-spark's cheap ones (INSERT, ALTER: about half a
#: CPU second on a warm session) often, the dear ones less (DELETE, UPDATE: about 1.5; MERGE 2.5; RESTORE and
#: VACUUM, compactor's with delta-spark's dry run beside it: 3.5-4.5)
OPS: list[tuple[float, Callable[[SparkHistory], None]]] = [
    (3, SparkHistory.append), (1, SparkHistory.delete), (0.7, SparkHistory.update), (0.4, SparkHistory.merge),
    (0.2, SparkHistory.restore), (0.4, SparkHistory.optimize), (0.2, SparkHistory.purge), (0.15, SparkHistory.vacuum),
    (0.2, SparkHistory.checkpoint), (1.5, SparkHistory.alter), (0.5, SparkHistory.age),
    (1, SparkHistory.plan), (2, lambda h: h.apply("local")), (2, lambda h: h.apply("spark")),
    (1.2, SparkHistory.apply_killed), (0.6, SparkHistory.compactor_vacuum), (0.6, SparkHistory.race_purge),
]
NAMES = ["append", "delete", "update", "merge", "restore", "optimize", "purge", "vacuum", "checkpoint", "alter", "age",
         "plan", "apply local", "apply spark", "apply killed", "compactor vacuum", "purge raced"]


@dataclass
class TableRun:
    """One table's histories: how many ended checked, and what was refused."""

    seed: int
    histories: int = 0
    refusals: Counter[str] = field(default_factory=Counter)
    #: how many histories met each refusal
    refused_in: Counter[str] = field(default_factory=Counter)
    spark_refusals: Counter[str] = field(default_factory=Counter)
    done: Counter[str] = field(default_factory=Counter)
    committed_on: Counter[str] = field(default_factory=Counter)
    failure: str | None = None
    log: list[str] = field(default_factory=list)
    #: seconds spent per kind of step, and how many ran (the CI budget's account)
    seconds: Counter[str] = field(default_factory=Counter)
    counts: Counter[str] = field(default_factory=Counter)
    cpu: Counter[str] = field(default_factory=Counter)


def run_table(spark: Any, root: Path, seed: int, histories: int, steps: int) -> TableRun:
    """``histories`` histories of ``steps`` steps on one table created by seed ``seed``; each history ends
    with delta-spark's read of the oracle's rows; the table's last, with compactor's default plan and apply
    on one engine (the seed's choice) converging, delta-spark's own snapshot agreeing with the replay of the
    log, and the change feed."""
    h = SparkHistory(spark, root / f"t{seed}", random.Random(seed))
    out = TableRun(seed)
    weights = [w for w, _ in OPS]
    clock = out.seconds

    tree = process_tree()

    def timed(name: str, fn: Callable[[], None]) -> None:
        t, c = time.monotonic(), cpu_seconds(tree)
        try:
            fn()
        finally:
            clock[name] += time.monotonic() - t
            out.cpu[name] += cpu_seconds(tree) - c
            out.counts[name] += 1

    doing = "create"

    def check() -> None:
        h.checks.step(h.meta.retention_h)

    try:
        timed("create", h.create)
        timed("checks", check)
        for i in range(histories):
            h.log.append(f"--- history {seed}.{i}")
            refused = h.refusals.copy()
            for _ in range(steps):
                k = h.rng.choices(range(len(OPS)), weights)[0]
                doing = NAMES[k]
                timed(doing, lambda: OPS[k][1](h))
                doing = f"the checks after {NAMES[k]}"
                timed("checks", check)
            doing = "verify"
            timed("verify", h.verify)
            out.histories += 1
            out.refused_in.update(set((h.refusals - refused).keys()))
        doing = "settle"
        timed("settle", lambda: h.settle((h.rng.choice(["local", "spark"]),)))
        doing = "the checks at the end"
        timed("verify", lambda: (h.checks.delta_spark_snapshot(h.meta.retention_h), h.verify(), h.verify_feed()))
    except Exception as e:  # noqa: BLE001 - reported with the seed and the history, the run goes on
        out.failure = f"in {doing} of history {seed}.{out.histories}: {type(e).__name__}: {e}"
    out.refusals, out.spark_refusals, out.done, out.log = h.refusals, h.spark_refusals, h.done, h.log
    out.committed_on = h.committed_on
    return out


def process_tree() -> list[int]:
    """This process and every process under it (the JVM)."""
    parent = {}
    for d in os.listdir("/proc"):
        if d.isdigit():
            try:
                parent[int(d)] = int(Path(f"/proc/{d}/stat").read_text().rsplit(")", 1)[1].split()[1])
            except OSError:
                continue

    def ours(pid: int) -> bool:
        while pid > 1:
            if pid == os.getpid():
                return True
            pid = parent.get(pid, 0)
        return False

    return [pid for pid in parent if ours(pid)]


def cpu_seconds(pids: list[int] | None = None) -> float:
    """User + system CPU seconds of ``pids`` (default: ``process_tree()``): what a run costs on a machine of
    its own, whatever else this one runs."""
    ticks, total = os.sysconf("SC_CLK_TCK"), 0.0
    for pid in process_tree() if pids is None else pids:
        try:
            fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
        except OSError:
            continue
        total += (int(fields[11]) + int(fields[12])) / ticks
    return total
