"""Every Spark-written table kind (tests/spark_tables.py) on every path compactor can take:

- ``local``: the local engine (pyarrow rewrite, delta-rs commit);
- ``spark-rewrite``: the spark engine with ``compaction.method: rewrite`` (Spark writes, delta-rs commits);
- ``spark-optimize``: the spark engine with ``compaction.method: optimize`` (delta-spark's OPTIMIZE).

Each combination is planned and applied through the real runner (``apply_plan``) and either compacts
(delta-spark reads exactly the same rows, as a multiset, and the live file count is what the plan said)
or is refused, with a reason naming the feature: a plan skip ``unsupported`` or an action error, and
the table untouched. Never a traceback, never a table delta-spark (or delta-rs) can no longer read.

Each kind is built once per module and copied for every path (a Delta table's log holds relative paths).
"""

from __future__ import annotations

import re
import shutil
from collections import Counter
from pathlib import Path
from typing import Any

import pytest

from compactor.engines.spark import SparkEngine
from compactor.project.model import Target
from compactor.tasks.apply import apply_plan
from tests import spark_tables as st
from tests.apply.helpers import plan_for

pytestmark = [pytest.mark.spark, pytest.mark.delta_jars]

PATHS = ("local", "spark-rewrite", "spark-optimize")
SPARK = Target(engine="spark")

#: what each kind must do on the paths whose commits go through delta-rs (local, spark-rewrite):
#: None = compacts every partition; otherwise a regex the refusal must match (naming the feature), and
#: whether the other partitions still compact ("partial")
REWRITE_EXPECTED: dict[str, tuple[str, bool] | None] = {
    "date_partitioned": None,
    "int_partitioned": None,
    "mixed_partitioned": None,
    # deletion_vectors, column_mapping, column_mapping_id: OWN_REWRITE_COMPACTS
    "clustered": (r"^clustering: ", False),
    "row_tracking": (r"^rowTracking: ", False),
    "v2_checkpoint": None,
    "multipart_checkpoint": None,
    "no_stats": None,
    "stats_off": None,
    # the non-ASCII partition's files are written raw by Spark: compactor's commit spells their removes so
    "awkward_partitions": None,
    "in_commit_timestamps": None,
    "type_widening": None,
    "change_data_feed": None,
    "streaming_appends": None,
}

#: kinds compactor's own rewrite (local, spark-rewrite) compacts, whatever REWRITE_EXPECTED says: it drops the rows
#: deletion vectors delete and removes each file with its descriptor (formats/delta/apply/deletes.py), and writes
#: column-mapped tables in their physical names and field ids (formats/delta/read/column_mapping.py), committing
#: itself (formats/delta/apply/log_writer.py)
OWN_REWRITE_COMPACTS = frozenset({"deletion_vectors", "column_mapping", "column_mapping_id"})

#: smaller than the builders' defaults where that keeps the kind's point (a build is most of a kind's time)
SMALLER: dict[str, dict[str, int]] = {
    "date_partitioned": {"appends": 2, "files": 3},
    "int_partitioned": {"appends": 2, "files": 3},
    "column_mapping": {"appends": 2, "files": 2},  # one append before the rename, one after
    "row_tracking": {"appends": 2, "files": 2},
    "v2_checkpoint": {"commits": 3},  # a v2 checkpoint (with sidecars) at version 2
    "multipart_checkpoint": {"commits": 3},  # a multi-part checkpoint at version 2
    "no_stats": {"appends": 2, "files": 2},
    "stats_off": {"appends": 2, "files": 2},
    "in_commit_timestamps": {"appends": 1},  # two files a day: one compaction stamped after the append's
    "change_data_feed": {"appends": 1},  # the UPDATE rewrites every file it touches, with change data files
    "streaming_appends": {"batches": 2},
}


def _rows(spark: Any, path: str, version: int | None = None) -> Counter:
    reader = spark.read.format("delta")
    if version is not None:
        reader = reader.option("versionAsOf", version)
    return Counter(tuple(r) for r in reader.load(path).collect())


def _detail(spark: Any, path: str) -> Any:
    return spark.sql(f"DESCRIBE DETAIL delta.`{path}`").collect()[0]


@pytest.fixture(scope="module")
def masters(delta_spark, tmp_path_factory):
    """kind -> (the built table, its rows as delta-spark reads them, its DESCRIBE DETAIL numFiles),
    built on first use."""
    built: dict[str, tuple[st.SparkTable, Counter, int]] = {}
    root = tmp_path_factory.mktemp("kinds")

    def get(kind: str) -> tuple[st.SparkTable, Counter, int]:
        if kind not in built:
            t = st.BUILDERS[kind](delta_spark, root / kind, **SMALLER.get(kind, {}))
            rows = _rows(delta_spark, t.path)
            assert sum(rows.values()) == t.rows
            built[kind] = (t, rows, _detail(delta_spark, t.path)["numFiles"])
        return built[kind]

    return get


@pytest.mark.parametrize("path_kind", PATHS)
@pytest.mark.parametrize("kind", list(st.BUILDERS))
def test_kind_on_path(delta_spark, masters, tmp_path: Path, kind: str, path_kind: str) -> None:
    master, rows_before, files_before = masters(kind)
    t = tmp_path / kind
    shutil.copytree(master.path, t)
    v0 = _detail(delta_spark, str(t))  # a fresh path: delta-spark has no cached snapshot of it
    assert v0["numFiles"] == files_before

    engine = "local" if path_kind == "local" else "spark"
    method = {"local": "auto", "spark-rewrite": "rewrite", "spark-optimize": "optimize"}[path_kind]
    plan = plan_for(t, engine=engine, method=method)
    (tp,) = plan.tables
    assert tp.error is None and tp.files_before == files_before
    unsupported = [s for s in tp.skipped if s.reason == "unsupported"]
    run = apply_plan(plan, target=SPARK if engine == "spark" else Target(),
                     engine=SparkEngine(SPARK) if engine == "spark" else None)
    results = run.results
    errors = [r.error or "" for r in results if r.status != "success"]
    assert not any("Traceback" in e for e in errors)

    # whatever happened, both Delta implementations still read the table, with exactly the same rows
    detail = _detail(delta_spark, str(t))
    assert _rows(delta_spark, str(t)) == rows_before
    from deltalake import DeltaTable

    assert DeltaTable(str(t)).version() >= 0
    expected = None if path_kind == "spark-optimize" or kind in OWN_REWRITE_COMPACTS else REWRITE_EXPECTED[kind]
    _record(kind, path_kind, tp, results, files_before, detail["numFiles"])
    _kind_checks(delta_spark, kind, t, int(tp.version or 0))

    if expected is None:  # compacts everything it planned
        assert not unsupported and not errors, (unsupported, errors)
        assert tp.actions and all(r.status == "success" for r in results)
        assert detail["numFiles"] == tp.files_after < files_before
        assert sum(r.files_removed - r.files_added for r in results) == files_before - tp.files_after
        assert all(r.rows_before == r.rows_after for r in results)
        return
    pattern, partial = expected
    reasons = [s.message for s in unsupported] + errors
    assert reasons and all(re.search(pattern, m) for m in reasons), reasons
    if partial:
        assert tp.actions and all(r.status == "success" for r in results)
        assert detail["numFiles"] == tp.files_after < files_before
    else:
        assert detail["numFiles"] == files_before
        assert all(r.files_removed == 0 for r in results)


def _kind_checks(spark: Any, kind: str, t: Path, planned_version: int) -> None:
    """What a kind's feature asks of every commit made since the plan (whoever wrote it), read with delta-spark
    and from the log."""
    made = [v for v in st.commit_versions(t) if v > planned_version]
    if kind == "in_commit_timestamps":  # commitInfo first, each inCommitTimestamp past the previous one's
        stamps = []
        for v in st.commit_versions(t):
            first = st.commit_actions(t, v)[0]
            assert "commitInfo" in first and isinstance(first["commitInfo"].get("inCommitTimestamp"), int), (v, first)
            stamps.append(first["commitInfo"]["inCommitTimestamp"])
        assert stamps == sorted(stamps) and len(set(stamps)) == len(stamps), stamps
        history = spark.sql(f"DESCRIBE HISTORY delta.`{t}`").select("version", "timestamp").collect()
        assert len(history) == len(stamps)
    if kind == "type_widening":  # the files a compaction adds hold the table's current type
        import pyarrow.parquet as pq

        for v in made:
            for a in st.commit_actions(t, v):
                if "add" in a:
                    assert str(pq.read_schema(t / a["add"]["path"]).field("qty").type) == "int64", a["add"]["path"]
    if kind == "change_data_feed" and made:  # the change feed shows no row of a dataChange=false commit
        changes = (spark.read.format("delta").option("readChangeFeed", "true")
                   .option("startingVersion", made[0]).load(str(t)))
        assert changes.count() == 0


#: (kind, path) -> a one-line outcome, printed at the end of the module (pytest -s) for the report
MATRIX: dict[tuple[str, str], str] = {}


def _record(kind: str, path_kind: str, tp: Any, results: list, files_before: int, files_after: int) -> None:
    skips = sorted({s.message for s in tp.skipped if s.reason == "unsupported"})
    errs = sorted({r.error for r in results if r.status != "success"})
    MATRIX[(kind, path_kind)] = (f"{files_before} -> {files_after} files"
                                 + (f"; skipped: {skips[0][:120]}" if skips else "")
                                 + (f"; error: {errs[0][:160]}" if errs else ""))


@pytest.fixture(scope="module", autouse=True)
def _print_matrix():
    yield
    for (kind, path_kind), line in sorted(MATRIX.items()):
        print(f"{kind:22} {path_kind:15} {line}")
