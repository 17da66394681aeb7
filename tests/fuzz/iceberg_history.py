"""Seeded random histories on a real pyiceberg table (format version 1 or 2, identity-partitioned or not) in a
SQL catalog on sqlite, with compactor's local engine (no JVM) interleaved, and an oracle of the rows each
snapshot holds (issue 39).

Other writers (``OPS``, through pyiceberg): appends of a few rows over several partitions (also to a branch),
deletes by a row-level predicate and overwrites of some rows (an update), both copy-on-write as pyiceberg does
them, upserts, a column added, the partition spec evolved (a field added or removed), a rollback to an
ancestor, tags and branches made, snapshots expired by pyiceberg (metadata only: their files stay).
compactor: a plan saved and applied later (stale, or still exact), a plan applied now, an apply killed at a
crash point of the Iceberg path or the lease (tests/formats/contract/lake.py ``killed_at``: the catalog and
its warehouse put back as the kill left them) followed by a recovering apply, and its retention
(``expire_snapshots`` and ``remove_orphan_files``, both at ``older_than: 0s``) planned and applied, raced by a
writer: a commit between the plan and the apply (an append, a tag on a planned snapshot, a rollback, a
pyiceberg expiry, a delete) or files a writer wrote before the plan (listed as orphans) and commits after
it, or right before apply's deletion gate reads the metadata.

The oracle is a multiset of rows per snapshot id. A writer's operation gives its last snapshot the rows the
model computes; a ``replace`` snapshot (compactor's) the rows of its parent; a snapshot an operation made on
the way (pyiceberg's overwrite commits a delete, then an append) the rows read right after it committed,
before compactor touched anything. After every operation (``check``): the current snapshot's rows equal the
oracle's, the metadata references no missing file, and time travel to the snapshots made by the operation
(to every snapshot still in the metadata after a compactor apply) returns their oracle's rows."""

from __future__ import annotations

import datetime as dt
import random
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pyarrow as pa

from compactor import api
from compactor.formats.iceberg.faults import CRASH_POINTS as ICEBERG_POINTS
from compactor.models.results import RunResults
from compactor.planning.plan import Plan
from compactor.project.model import ProjectOptions
from tests.fuzz.iceberg_checks import (
    Failure,
    References,
    Row,
    local,
    rows_of,
)
from tests.iceberg.project import policy, profiles
from tests.iceberg.tables import catalog

if TYPE_CHECKING:
    from pyiceberg.catalog.sql import SqlCatalog
    from pyiceberg.table import Table

CRASH_POINTS = (*ICEBERG_POINTS, "lease.acquired")
IDENTIFIER = "db.t"
#: the retention policy's block: both actions at zero age (allowed only as unsafe, with a reader lag of 0s)
RETENTION = ("    compaction: {{enabled: false}}\n    retention:\n      allow_unsafe_retention: true\n"
             "      min_reader_lag: 0s\n      expire_snapshots: {{enabled: true, older_than: 0s, retain_last: {keep}}}\n"
             "      remove_orphan_files: {{enabled: true, older_than: 0s}}\n")


@dataclass
class IcebergHistory:
    root: Path
    rng: random.Random
    #: oracle: snapshot id -> rows; snapshots expired since are dropped
    oracle: dict[int, Counter[Row]] = field(default_factory=dict)
    log: list[str] = field(default_factory=list)
    next_id: int = 0
    note: bool = False
    #: saved compaction plans, applied later
    plans: list[Path] = field(default_factory=list)
    #: what compactor did (outcomes by action and how), for the report
    done: Counter[str] = field(default_factory=Counter)
    refs: References = field(default_factory=References)
    #: each snapshot's name in the log: s<n>, n its place in commit order (ids are random: a replayed
    #: history names its snapshots the same)
    names: dict[int, str] = field(default_factory=dict)
    _catalog: SqlCatalog | None = None
    _planned: int = 0

    # ------------------------------------------------------------------ the table and its projects

    @property
    def cat(self) -> SqlCatalog:
        if self._catalog is None:
            self._catalog = catalog(self.root)
        return self._catalog

    def table(self) -> Table:
        return self.cat.load_table(IDENTIFIER)

    def forget_catalog(self) -> None:
        """After a kill put catalog.db back: the pooled connections name the file it replaced."""
        if self._catalog is not None:
            self._catalog.engine.dispose()
            self._catalog = None

    @property
    def table_path(self) -> Path:
        return local(self.table().location())

    def create(self) -> None:
        from pyiceberg.partitioning import PartitionField, PartitionSpec
        from pyiceberg.schema import Schema
        from pyiceberg.transforms import IdentityTransform
        from pyiceberg.types import LongType, NestedField

        version = self.rng.choice([1, 2, 2])
        spec = PartitionSpec(PartitionField(2, 1000, IdentityTransform(), "p")) if self.rng.random() < 0.75 \
            else PartitionSpec()
        schema = Schema(NestedField(1, "id", LongType(), required=False), NestedField(2, "p", LongType(), required=False),
                        NestedField(3, "val", LongType(), required=False))
        self.cat.create_table(IDENTIFIER, schema=schema, partition_spec=spec, properties={"format-version": str(version)})
        keep = self.rng.randint(1, 3)
        for name, text in (("compact", policy("t")), ("retain", policy("t").split("    compaction:")[0]
                                                      + RETENTION.format(keep=keep))):
            project = self.root / name
            (project / "policies").mkdir(parents=True)
            (project / "compactor.yml").write_text(f"name: {name}\n")
            (project / "profiles.yml").write_text(profiles(self.root))
            (project / "policies" / "t.yml").write_text(text)
        self.log.append(f"create v{version} {'identity(p)' if spec.fields else 'unpartitioned'}, retain_last {keep}")
        self.append()

    # ------------------------------------------------------------------ the oracle

    def rows(self, ref: str = "main") -> Counter[Row]:
        t = self.table()
        head = t.metadata.refs.get(ref)
        return Counter() if head is None else self.oracle[head.snapshot_id]

    def record(self, expected: Counter[Row] | None, ref: str = "main") -> list[int]:
        """The oracle of the snapshots made since the last record (module docstring): ``expected`` is the
        rows of ``ref``'s head when the operation made it (None: compactor's, whose snapshots are all
        ``replace``). Returns the new snapshot ids."""
        t = self.table()
        made = [s for s in t.metadata.snapshots if s.snapshot_id not in self.oracle]  # in commit order
        head = t.metadata.refs[ref].snapshot_id if ref in t.metadata.refs else None
        for s in made:
            self.names[s.snapshot_id] = f"s{len(self.names)}"
            op = s.summary.operation.value if s.summary is not None else "?"
            if op == "replace":
                if s.parent_snapshot_id not in self.oracle:
                    raise Failure(f"replace snapshot {s.snapshot_id} has a parent {s.parent_snapshot_id} not in the oracle")
                self.oracle[s.snapshot_id] = self.oracle[s.parent_snapshot_id]
            elif expected is None:
                raise Failure(f"compactor committed a {op} snapshot {s.snapshot_id}: it commits replace snapshots only")
            elif s.snapshot_id == head:
                self.oracle[s.snapshot_id] = Counter(expected)
            else:  # made on the way by one operation: its rows as read when it committed
                self.oracle[s.snapshot_id] = rows_of(t, s.snapshot_id)
        if expected is not None and head is not None and self.oracle[head] != expected:
            raise Failure(f"the head of {ref} holds {_diff(self.oracle[head], expected)}")
        gone = set(self.oracle) - {s.snapshot_id for s in t.metadata.snapshots}
        for sid in gone:
            del self.oracle[sid]
        return [s.snapshot_id for s in made]

    def check(self, travel: list[int] | None = None) -> None:
        """The current rows are the oracle's, the metadata references no missing file, time travel to
        ``travel`` (None: every snapshot in the metadata) returns the oracle's rows."""
        t = self.table()
        missing = self.refs.missing(t)
        if missing:
            raise Failure(f"the metadata references {len(missing)} missing file(s), e.g. {missing[:3]}")
        current = t.metadata.current_snapshot_id
        got = rows_of(t)
        want = self.oracle[current] if current is not None else Counter()
        if got != want:
            raise Failure(f"the current snapshot {self.name(current)} holds {_diff(got, want)}")
        ids = list(self.oracle) if travel is None else [i for i in travel if i in self.oracle]
        for sid in ids:
            got = rows_of(t, sid)
            if got != self.oracle[sid]:
                raise Failure(f"time travel to snapshot {self.name(sid)} returns {_diff(got, self.oracle[sid])}")

    def name(self, *ids: int | None) -> str:
        """Snapshots as the log names them."""
        return ", ".join(self.names.get(i, str(i)) if i is not None else "none" for i in ids)

    # ------------------------------------------------------------------ other writers

    def frame(self, t: Table, rows: list[Row]) -> pa.Table:
        """``rows`` as an Arrow table in ``t``'s schema (note only once the column was added)."""
        cols: dict[str, list[Any]] = {"id": [r[0] for r in rows], "p": [r[1] for r in rows], "val": [r[2] for r in rows]}
        if self.note:
            cols["note"] = [r[3] for r in rows]
        return pa.table(cols, schema=t.schema().as_arrow())

    def new_rows(self, k: int, part: int | None = None) -> list[Row]:
        """``k`` rows with new ids, in partition ``part`` (None: spread over one to three of 0, 1, 2)."""
        ids = range(self.next_id, self.next_id + k)
        self.next_id += k
        parts = [part] if part is not None else self.rng.sample(range(3), self.rng.randint(1, 3))
        return [(i, self.rng.choice(parts), 0, "n" if self.note else None) for i in ids]

    def append(self, ref: str | None = None, part: int | None = None) -> list[int]:
        t = self.table()
        branches = [n for n, r in t.metadata.refs.items() if r.snapshot_ref_type.value == "branch" and n != "main"]
        ref = ref or ("main" if not branches or self.rng.random() < 0.8 else self.rng.choice(branches))
        new = self.new_rows(self.rng.randint(1, 5), part)
        before = self.rows(ref)
        t.append(self.frame(t, new), branch=ref)
        self.log.append(f"append ids {new[0][0]}..{new[-1][0]} in p {sorted({r[1] for r in new})} to {ref}")
        return self.record(before + Counter(new), ref)

    def delete(self) -> list[int]:
        from pyiceberg.expressions import EqualTo, In, LessThan

        rows = self.rows()
        ids = sorted(r[0] for r in rows) or [0]
        how = self.rng.choice(["ids", "below", "partition", "val"])
        if how == "ids":
            pick = self.rng.sample(ids, min(len(ids), self.rng.randint(1, 4)))
            pred, keep = In("id", pick), lambda r: r[0] not in pick
        elif how == "below":
            x = self.rng.choice(ids)
            pred, keep = LessThan("id", x), lambda r: r[0] >= x
        elif how == "partition":
            x = self.rng.randint(0, 2)
            pred, keep = EqualTo("p", x), lambda r: r[1] != x
        else:
            x = self.rng.randint(0, 2)
            pred, keep = EqualTo("val", x), lambda r: r[2] != x
        self.table().delete(pred)
        self.log.append(f"delete where {pred}")
        return self.record(Counter({r: n for r, n in rows.items() if keep(r)}))

    def update(self) -> list[int]:
        """An overwrite of some rows by the same rows with ``val + 1`` (pyiceberg: a delete by the filter,
        then an append)."""
        from pyiceberg.expressions import In

        rows = self.rows()
        if not rows:
            return []
        pick = self.rng.sample(sorted(rows, key=repr), min(len(rows), self.rng.randint(1, 4)))
        ids = sorted({r[0] for r in pick})
        old = [r for r in rows.elements() if r[0] in ids]
        new = [(i, p, v + 1, n) for i, p, v, n in old]
        t = self.table()
        t.overwrite(self.frame(t, new), overwrite_filter=In("id", ids))
        self.log.append(f"overwrite ids {ids} with val + 1")
        return self.record(rows - Counter(old) + Counter(new))

    def upsert(self) -> list[int]:
        """An upsert of two rows by id and one new row; not once a column was added: pyiceberg 0.12's upsert
        then fails on its own (it casts the rows it read in the old schema to the new one: ValueError)."""
        if self.note:
            return self.update()
        rows = self.rows()
        by_id = {r[0]: r for r in rows}
        new = self.new_rows(1)
        hit = [(i, p, 7, "u" if self.note else None) for i, p, _, _ in
               (by_id[i] for i in self.rng.sample(sorted(by_id), min(len(by_id), 2)))]
        t = self.table()
        t.upsert(self.frame(t, hit + new), join_cols=["id"])
        self.log.append(f"upsert ids {[r[0] for r in hit + new]}")
        return self.record(rows - Counter(by_id[r[0]] for r in hit) + Counter(hit + new))

    def evolve(self) -> list[int]:
        """A column added, or the partition spec evolved (identity(p) added or removed, or a bucket of id
        added)."""
        from pyiceberg.transforms import BucketTransform, IdentityTransform
        from pyiceberg.types import StringType

        t = self.table()
        if not self.note and self.rng.random() < 0.4:
            with t.update_schema() as u:
                u.add_column("note", StringType())
            self.note = True
            self.log.append("add column note")
        else:
            names = {f.name for f in t.spec().fields}
            with t.update_spec() as s:
                if "p" in names and self.rng.random() < 0.5:
                    s.remove_field("p")
                    what = "remove identity(p)"
                elif "p" not in names:
                    s.add_field("p", IdentityTransform(), "p")
                    what = "add identity(p)"
                elif "id_bucket" not in names:
                    s.add_field("id", BucketTransform(2), "id_bucket")
                    what = "add bucket(2, id)"
                else:
                    s.remove_field("id_bucket")
                    what = "remove bucket(2, id)"
            self.log.append(f"partition spec: {what}")
        return self.record(self.rows())

    def refs_change(self) -> list[int]:
        """A tag on a random snapshot, a branch at the current one, a tag removed, or a rollback to an
        ancestor of the current snapshot."""
        from pyiceberg.table.snapshots import ancestors_of

        t = self.table()
        md = t.metadata
        how = self.rng.choice(["tag", "tag", "branch", "untag", "rollback"])
        tags = sorted(n for n, r in md.refs.items() if r.snapshot_ref_type.value == "tag")
        head = md.current_snapshot()
        ancestors = [s.snapshot_id for s in ancestors_of(head, md)][1:] if head is not None else []
        n = len(self.log)
        if how == "tag" or (how == "untag" and not tags) or (how == "rollback" and not ancestors):
            sid = self.rng.choice(list(self.oracle))  # in commit order
            t.manage_snapshots().create_tag(sid, f"tag{n}").commit()
            self.log.append(f"tag tag{n} on {self.name(sid)}")
        elif how == "branch":
            t.manage_snapshots().create_branch(md.current_snapshot_id, f"b{n}").commit()
            self.log.append(f"branch b{n} at {self.name(md.current_snapshot_id)}")
        elif how == "untag":
            name = self.rng.choice(tags)
            t.manage_snapshots().remove_tag(name).commit()
            self.log.append(f"remove tag {name}")
        else:
            sid = self.rng.choice(ancestors)
            t.manage_snapshots().rollback_to_snapshot(sid).commit()
            self.log.append(f"rollback to {self.name(sid)}")
        return self.record(self.rows())

    def position_delete(self) -> list[int]:
        """A merge-on-read delete of a few rows of data files without deletes (v2: position deletes, as Spark
        writes them; tests/iceberg/tables.py commits them through pyiceberg's producer): one file's (a
        file-scoped delete file), or two files' of one partition (one partition-scoped delete file: it still
        applies to the other file when compactor replaces one)."""
        import pyarrow.parquet as pq

        from tests.iceberg.tables import commit_position_deletes

        t = self.table()
        if t.metadata.format_version < 2 or t.current_snapshot() is None:
            return []
        by_partition: dict[Any, list[str]] = {}
        for task in t.scan().plan_files():
            if not task.delete_files:
                by_partition.setdefault((task.file.spec_id, str(task.file.partition)), []).append(str(task.file.file_path))
        if not by_partition:
            return []
        two = [v for v in by_partition.values() if len(v) > 1]  # in the scan's order (paths are random)
        paths = self.rng.sample(self.rng.choice(two), 2) if two and self.rng.random() < 0.5 \
            else [self.rng.choice([p for v in by_partition.values() for p in v])]
        positions: dict[str, list[int]] = {}
        gone: Counter[Row] = Counter()
        for path in paths:
            data = pq.read_table(local(path)).to_pylist()
            at = positions[path] = sorted(self.rng.sample(range(len(data)), self.rng.randint(1, len(data))))
            gone.update((r["id"], r["p"], r["val"], r.get("note")) for r in (data[i] for i in at))
        before = self.rows()
        commit_position_deletes(t, positions, file_scoped=len(paths) == 1)
        self.log.append(f"position delete of rows {sorted(r[0] for r in gone.elements())} in {len(paths)} file(s)")
        return self.record(before - gone)

    def abandoned_write(self) -> list[int]:
        """A writer that wrote its data files and died before its commit: orphans."""
        from pyiceberg.io.pyarrow import _dataframe_to_data_files

        t = self.table()
        files = list(_dataframe_to_data_files(t.metadata, self.frame(t, self.new_rows(2)), t.io))
        self.log.append(f"a writer writes {len(files)} file(s) and dies before its commit")
        return []

    def expire(self) -> list[int]:
        """pyiceberg's expiry of one or two snapshots neither current nor held by a ref (metadata only)."""
        t = self.table()
        md = t.metadata
        held = {r.snapshot_id for r in md.refs.values()}
        free = [s.snapshot_id for s in md.snapshots if s.snapshot_id not in held]  # in commit order
        if not free:
            return []
        ids = self.rng.sample(free, min(len(free), self.rng.randint(1, 2)))
        t.maintenance.expire_snapshots().by_ids(ids).commit()
        self.log.append(f"pyiceberg expires {self.name(*ids)}")
        return self.record(self.rows())

    # ------------------------------------------------------------------ compactor

    def options(self, project: str) -> ProjectOptions:
        return ProjectOptions(project_dir=self.root / project)

    def plan(self, project: str = "compact") -> tuple[Plan, Path]:
        self._planned += 1
        out = self.root / "plans" / f"{project}-{self._planned}.json"
        made = api.plan(self.options(project), now=dt.datetime.now(dt.UTC), out=out)
        return made, out

    def apply(self, plan: Path, project: str = "compact") -> RunResults:
        return api.apply(self.options(project), plan_file=plan, watch_s=0)


def _diff(got: Counter[Row], want: Counter[Row]) -> str:
    lost, extra = want - got, got - want
    return (f"{sum(got.values())} row(s), the oracle {sum(want.values())}: lost {sorted(lost, key=repr)[:5]}, "
            f"extra {sorted(extra, key=repr)[:5]}")
