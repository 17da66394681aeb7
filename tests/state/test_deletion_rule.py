"""The deletion gate's rule against delta-spark's own VACUUM (issue 36): for random logs, a file is deletable
by compactor's rule (formats/delta/read/vacuum_listing.py) exactly when delta-spark's VACUUM DRY RUN names it
on the same table, except where compactor deliberately keeps more (named below, each checked).

A history is written by hand as the protocol defines it (delta-spark reads it): appends, files removed with
their deletion vectors, files given new deletion vectors (stored by UUID under a random prefix or by absolute
path), a removed path added again, change data files, commits older and newer than the
retention, an optional checkpoint written by delta-spark itself, and files nobody references: orphans,
hidden names (Spark's checksums, a ``_`` folder), ``_delta_index``, a partition folder whose column starts
with ``_``, an unreferenced deletion vector file. Every file's age is the age of the commit that wrote it.

No history holds an inline deletion vector: delta-spark 4.4's VACUUM fails on one (a ``MatchError`` in
``getDeletionVectorRelativePathAndSize``, which matches no inline descriptor); the replay's reading of
them (no file) is tested in test_log_replay.py.

What compactor keeps that delta-spark's VACUUM would delete: a deletion vector stored by absolute path
inside the table (delta-spark never counts a ``p`` descriptor; deleting it breaks every reader of the
file it belongs to)."""

from __future__ import annotations

import json
import os
import random
import time
import uuid
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from compactor.formats.delta.read.vacuum_listing import stored_names, vacuum_listing
from compactor.models.table import TableLocation
from tests.spark_tables import session_conf

Z85 = "0123456789abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ.-:+=^!/*?&<>()[]{}@%$#"
OLD_S, NEW_S = 3 * 3600, 300  # ages either side of the one-hour retention, far from its boundary
PART = "_p"  # a partition column whose folders start with "_" and are still vacuumed
EXAMPLES = int(os.environ.get("COMPACTOR_DELETION_RULE_EXAMPLES") or 10)


def z85(ident: uuid.UUID) -> str:
    out = []
    raw = ident.bytes
    for k in range(0, 16, 4):
        n = int.from_bytes(raw[k:k + 4], "big")
        block = []
        for _ in range(5):
            n, r = divmod(n, 85)
            block.append(Z85[r])
        out.extend(reversed(block))
    return "".join(out)


class LogWriter:
    """A Delta table written by hand, one commit at a time, with every file's age set."""

    def __init__(self, root: Path, rng: random.Random) -> None:
        self.root, self.rng = root, rng
        self.version = -1
        self.live: dict[str, dict | None] = {}  # path -> its deletion vector descriptor
        self.removed: list[str] = []
        self.kept_by_design: set[str] = set()  # files compactor keeps and delta-spark's VACUUM would not
        self.ages: dict[str, float] = {}
        (root / "_delta_log").mkdir(parents=True)

    def _file(self, rel: str, age: float, data: bytes = b"PAR1 not read by VACUUM PAR1") -> None:
        p = self.root / rel
        p.parent.mkdir(parents=True, exist_ok=True)
        p.write_bytes(data)
        self.ages[rel] = age

    def _new_path(self, age: float) -> str:
        rel = f"{PART}={self.rng.choice('ab')}/part-{uuid.uuid4()}.c000.snappy.parquet"
        self._file(rel, age)
        self._file(f"{rel.rsplit('/', 1)[0]}/.{rel.rsplit('/', 1)[1]}.crc", age)  # Spark's checksum
        return rel

    def _dv(self, age: float) -> dict:
        kind = self.rng.choice("uup")
        base = {"offset": 1, "sizeInBytes": 34, "cardinality": 1}
        ident = uuid.uuid4()
        if kind == "u":
            prefix = "".join(self.rng.choice("abcxyz") for _ in range(self.rng.randint(0, 2)))
            rel = f"{prefix}/deletion_vector_{ident}.bin" if prefix else f"deletion_vector_{ident}.bin"
            self._file(rel, age)
            return {"storageType": "u", "pathOrInlineDv": prefix + z85(ident), **base}
        rel = f"dv/deletion_vector_{ident}.bin"
        self._file(rel, age)
        self.kept_by_design.add(rel)
        return {"storageType": "p", "pathOrInlineDv": (self.root / rel).as_uri(), **base}

    def commit(self, age: float, actions: list[dict]) -> None:
        self.version += 1
        now_ms = int((time.time() - age) * 1000)
        lines = [{"commitInfo": {"timestamp": now_ms, "operation": "WRITE"}}, *actions]
        f = self.root / "_delta_log" / f"{self.version:020d}.json"
        f.write_text("\n".join(json.dumps(a) for a in lines) + "\n")
        self.ages[f"_delta_log/{f.name}"] = age

    def add(self, path: str, dv: dict | None = None) -> dict:
        self.live[path] = dv
        action = {"path": path, "partitionValues": {PART: path.split("/")[0].split("=")[1]}, "size": 29,
                  "modificationTime": 0, "dataChange": True, "stats": '{"numRecords": 2}'}
        return {"add": {**action, **({"deletionVector": dv} if dv else {})}}

    def remove(self, path: str, age: float) -> dict:
        dv = self.live.pop(path)
        self.removed.append(path)
        action = {"path": path, "deletionTimestamp": int((time.time() - age) * 1000), "dataChange": True,
                  "extendedFileMetadata": True, "partitionValues": {PART: path.split("/")[0].split("=")[1]}, "size": 29}
        return {"remove": {**action, **({"deletionVector": dv} if dv else {})}}

    def step(self, age: float) -> None:
        """One random commit."""
        rng, actions = self.rng, []
        kind = rng.choice(["append", "append", "dv", "dv", "remove", "readd", "cdc"]) if self.live else "append"
        if kind == "append":
            actions = [self.add(self._new_path(age)) for _ in range(rng.randint(1, 3))]
        elif kind == "dv":  # a DELETE with deletion vectors: the file stays, with a new descriptor
            path = rng.choice(sorted(self.live))
            actions = [self.remove(path, age), self.add(path, self._dv(age))]
        elif kind == "remove":
            actions = [self.remove(rng.choice(sorted(self.live)), age)]
        elif kind == "readd" and self.removed:  # RESTORE: a removed file is live again
            path = rng.choice(self.removed)
            if path not in self.live:
                actions = [self.add(path)]
        else:  # change data of an UPDATE
            rel = f"_change_data/{PART}=a/cdc-{uuid.uuid4()}.c000.snappy.parquet"
            self._file(rel, age)
            actions = [{"cdc": {"path": rel, "partitionValues": {PART: "a"}, "size": 29, "dataChange": False}},
                       self.add(self._new_path(age))]
        if actions:
            self.commit(age, actions)

    def unreferenced(self) -> None:
        for rel in (f"{PART}=a/part-orphan-{uuid.uuid4()}.parquet", f"orphan-{uuid.uuid4()}.parquet",
                    f"_tmp/part-{uuid.uuid4()}.parquet", f"_delta_index/index-{uuid.uuid4()}.bin",
                    f"deletion_vector_{uuid.uuid4()}.bin", f"{PART}=b/.hidden-{uuid.uuid4()}.parquet"):
            self._file(rel, self.rng.choice([OLD_S, NEW_S]))

    def set_ages(self) -> None:
        now = time.time()
        for rel, age in self.ages.items():
            os.utime(self.root / rel, (now - age, now - age))


def write_history(root: Path, seed: int) -> LogWriter:
    rng = random.Random(seed)
    w = LogWriter(root, rng)
    schema = {"type": "struct", "fields": [{"name": "id", "type": "long", "nullable": True, "metadata": {}},
                                           {"name": PART, "type": "string", "nullable": True, "metadata": {}}]}
    w.commit(OLD_S + 60, [
        {"protocol": {"minReaderVersion": 3, "minWriterVersion": 7, "readerFeatures": ["deletionVectors"],
                      "writerFeatures": ["deletionVectors", "changeDataFeed"]}},
        {"metaData": {"id": str(uuid.uuid4()), "format": {"provider": "parquet", "options": {}},
                      "schemaString": json.dumps(schema), "partitionColumns": [PART],
                      "configuration": {"delta.enableDeletionVectors": "true", "delta.enableChangeDataFeed": "true",
                                        "delta.deletedFileRetentionDuration": "interval 1 hours"},
                      "createdTime": int(time.time() * 1000)}},
        *[w.add(w._new_path(OLD_S + 60)) for _ in range(2)]])
    for _ in range(rng.randint(1, 5)):
        w.step(OLD_S)
    for _ in range(rng.randint(0, 4)):
        w.step(NEW_S)
    w.unreferenced()
    w.set_ages()
    return w


def _delta_spark_would_delete(spark, root: Path) -> set[str]:
    # Delta lists the table in this many tasks (10,000 by default: a minute for a tiny table on 2 cores)
    with session_conf(spark, {"spark.sql.sources.parallelPartitionDiscovery.parallelism": "2"}):
        names = [str(r[0]) for r in spark.sql(f"VACUUM delta.`{root}` DRY RUN").collect()]
    relative = stored_names(names, str(root))
    return {f for f in relative if (root / f).is_file()}  # its list also names empty folders


@pytest.mark.delta_jars
@settings(max_examples=EXAMPLES, deadline=None, suppress_health_check=list(HealthCheck), derandomize=True)
@given(seed=st.integers(0, 2**31), checkpoint=st.booleans())
def test_compactor_deletes_exactly_what_delta_sparks_vacuum_would(delta_spark, tmp_path_factory, seed: int,
                                                                  checkpoint: bool) -> None:
    root = tmp_path_factory.mktemp("rule") / "t"
    w = write_history(root, seed)
    if checkpoint:  # delta-spark's own checkpoint (it drops tombstones older than the retention)
        log = delta_spark._jvm.org.apache.spark.sql.delta.DeltaLog.forTable(delta_spark._jsparkSession, str(root))
        log.checkpoint()
        w.set_ages()
    theirs = _delta_spark_would_delete(delta_spark, root)
    ours = set(vacuum_listing(TableLocation(str(root)), 1).files)
    assert theirs - ours <= w.kept_by_design, f"seed {seed}: compactor keeps {sorted(theirs - ours - w.kept_by_design)}"
    assert ours <= theirs, f"seed {seed}: compactor would delete {sorted(ours - theirs)}, delta-spark would not"
    print(f"seed {seed}: {len(ours)} deletable by both, {len(theirs - ours)} kept by design")
    live_dvs = {d["pathOrInlineDv"] for d in w.live.values() if d and d["storageType"] == "p"}
    for rel in theirs - ours:  # delta-spark's VACUUM would break a live file here: said, and proved kept
        if (root / rel).as_uri() in live_dvs:
            assert rel in w.kept_by_design
