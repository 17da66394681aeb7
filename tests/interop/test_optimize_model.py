"""compactor's delta-spark bin model against real OPTIMIZE (delta-spark 4.4.0) on Spark-written tables.

For every partition: the files the model packs (input), the number of bins (output files), and the
files OPTIMIZE's commit actually removed. ``optimize_bins`` below is the full rule read from
delta-spark 4.4.0's OptimizeTableCommand (size candidates *and* deletion-vector candidates); it is the
proposed replacement for ``bins_delta_spark`` and is checked on the same tables plus DV tables.
"""

from __future__ import annotations

import json
import random
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any
from urllib.parse import unquote

import pytest

from compactor.planning.bins import bins_delta_spark
from tests import spark_tables as st

pytestmark = [pytest.mark.spark, pytest.mark.delta_jars]

MIN_FILE_SIZE = "spark.databricks.delta.optimize.minFileSize"
MAX_FILE_SIZE = "spark.databricks.delta.optimize.maxFileSize"
MAX_DELETED_ROWS_RATIO = "spark.databricks.delta.optimize.maxDeletedRowsRatio"


@dataclass(frozen=True)
class FileInfo:
    size: int
    num_records: int | None = None  # stats numRecords: physical rows, deleted ones included
    deleted_rows: int = 0  # deletion vector cardinality (0: no DV)
    has_dv: bool = False


def optimize_bins(files: Sequence[FileInfo], max_file_size: int, min_file_size: int,
                  max_deleted_rows_ratio: float = 0.05) -> list[list[int]]:
    """delta-spark 4.4 OPTIMIZE (compaction mode) for one partition: indices of each rewritten bin."""

    def candidate(f: FileInfo) -> bool:
        if f.size < min_file_size:
            return True
        if f.has_dv and f.num_records is None:
            return True
        return bool(f.num_records) and f.deleted_rows / f.num_records > max_deleted_rows_ratio

    order = sorted((i for i, f in enumerate(files) if candidate(f)), key=lambda i: files[i].size)
    bins: list[list[int]] = []
    cur: list[int] = []
    total = 0
    for i in order:
        if files[i].size + total > max_file_size:
            bins.append(cur)
            cur, total = [], 0
        cur.append(i)
        total += files[i].size
    bins.append(cur)
    return [b for b in bins if len(b) > 1]


def _info(add: dict[str, Any]) -> FileInfo:
    stats = json.loads(add["stats"]) if add.get("stats") else {}
    dv = add.get("deletionVector") or {}
    return FileInfo(add["size"], stats.get("numRecords"), dv.get("cardinality", 0), bool(dv))


def _optimize(spark: Any, path: str, where: str | None, conf: dict[str, str]) -> tuple[Any, list[dict], list[dict]]:
    """Run OPTIMIZE; return its metrics and the add/remove actions of its commit."""
    before = st.commit_versions(path)[-1]
    with st.session_conf(spark, conf):
        sql = f"OPTIMIZE delta.`{path}`" + (f" WHERE {where}" if where else "")
        metrics = spark.sql(sql).collect()[0]["metrics"]
    after = st.commit_versions(path)[-1]
    actions = st.commit_actions(path, after) if after > before else []
    if actions:
        assert next(a for a in actions if "commitInfo" in a)["commitInfo"]["operation"] == "OPTIMIZE"
    return (metrics, [a["add"] for a in actions if "add" in a], [a["remove"] for a in actions if "remove" in a])


def _random_table(seed: int) -> tuple[list[tuple[str, int]], int, int]:
    """2-3 days of 6-10 files: many mid-sized (20-400 rows, ~1.5-30 kB), some equal tiny ones (5 rows)
    and some far above the target (2500 rows, ~175 kB); max/min file size drawn around them."""
    rng = random.Random(seed)
    days = [f"2024-02-0{i + 1}" for i in range(rng.choice([2, 3]))]
    max_fs = rng.randint(25_000, 45_000)
    min_fs = int(max_fs * rng.uniform(0.5, 1.3))
    spec = [(d, rng.choice([5, 5, 2500] + [rng.randint(20, 400)] * 6)) for d in days for _ in range(rng.randint(6, 10))]
    rng.shuffle(spec)
    return spec, max_fs, min_fs


@pytest.mark.parametrize("seed", [3, 5, 6])
def test_bin_model_matches_optimize_per_partition(delta_spark, tmp_path, seed: int) -> None:
    spec, max_fs, min_fs = _random_table(seed)
    t = st.sized_files(delta_spark, tmp_path / "t", spec)
    adds = st.live_adds(t.path)
    days = sorted({a["partitionValues"]["date"] for a in adds})
    assert len(days) in (2, 3) and any(a["size"] > max_fs for a in adds)
    multi_bin = dropped = 0
    for day in days:
        part = [a for a in adds if a["partitionValues"]["date"] == day]  # log order
        sizes = [a["size"] for a in part]
        predicted = bins_delta_spark(sizes, max_fs, min_fs)
        assert optimize_bins([_info(a) for a in part], max_fs, min_fs) == predicted
        predicted_in = [part[i] for b in predicted for i in b]

        metrics, added, removed = _optimize(delta_spark, t.path, f"date = '{day}'",
                                            {MIN_FILE_SIZE: str(min_fs), MAX_FILE_SIZE: str(max_fs)})

        assert metrics["numFilesRemoved"] == len(removed) == len(predicted_in), (day, sizes)
        assert metrics["numFilesAdded"] == len(added) == metrics["numBins"] == len(predicted), (day, sizes)
        assert all(r["partitionValues"]["date"] == day and r["dataChange"] is False for r in removed)
        # the exact files: by size (ties between equal sizes may be ordered differently), and by path
        # for every size that occurs once in the partition
        assert Counter(r["size"] for r in removed) == Counter(a["size"] for a in predicted_in)
        unique = {s for s, n in Counter(sizes).items() if n == 1}
        assert ({r["path"] for r in removed if r["size"] in unique}
                == {a["path"] for a in predicted_in if a["size"] in unique})
        multi_bin += len(predicted) > 1
        dropped += sum(1 for s in sizes if s < min_fs) - len(predicted_in)
    # the seeds are chosen so that the interesting cases happen: several bins, lone small files left
    assert multi_bin >= 1 and dropped >= 1
    assert delta_spark.read.format("delta").load(t.path).count() == t.rows


def _dv_key(action: dict[str, Any]) -> tuple[str, str | None, int | None]:
    dv = action.get("deletionVector") or {}
    return action["path"], dv.get("pathOrInlineDv"), dv.get("offset")


def test_deletion_vector_files_are_candidates_whatever_their_size(delta_spark, tmp_path) -> None:
    """Files whose deleted-row ratio exceeds maxDeletedRowsRatio are rewritten even though they are
    above minFileSize (a size-only model predicts nothing here), but like small files they are only
    rewritten when their bin holds at least two files: a lone DV file keeps its DV."""
    spec = [("A", 300), ("A", 301), ("A", 302), ("B", 303), ("C", 304), ("C", 305)]
    conf = {MIN_FILE_SIZE: "1000", MAX_FILE_SIZE: "1000000"}
    results = {}
    for ratio in ("0.05", "0.2"):
        t = st.sized_files(delta_spark, tmp_path / f"t{ratio}", spec, properties={"delta.enableDeletionVectors": "true"})
        delta_spark.sql(f"DELETE FROM delta.`{t.path}` WHERE date IN ('A', 'B') AND id % 10 = 0")
        adds = st.live_adds(t.path)
        assert sum(1 for a in adds if a.get("deletionVector")) == 4 and all(a["size"] > 20_000 for a in adds)
        predicted = set()
        for day in "ABC":
            part = [a for a in adds if a["partitionValues"]["date"] == day]
            assert bins_delta_spark([a["size"] for a in part], 1_000_000, 1000) == []
            bins = optimize_bins([_info(a) for a in part], 1_000_000, 1000, float(ratio))
            predicted |= {_dv_key(part[i]) for b in bins for i in b}
        metrics, added, removed = _optimize(delta_spark, t.path, None, {**conf, MAX_DELETED_ROWS_RATIO: ratio})
        assert {_dv_key(r) for r in removed} == predicted
        results[ratio] = (sorted(r["partitionValues"]["date"] for r in removed), [a["partitionValues"]["date"] for a in added])
        assert delta_spark.read.format("delta").load(t.path).count() == t.rows - 90 - 30
    # ratio 0.1 > 0.05: A's three DV files become one; B's single DV file is left alone
    assert results == {"0.05": (["A", "A", "A"], ["A"]), "0.2": ([], [])}


def test_clustered_tables_rewrite_files_above_min_file_size(delta_spark, tmp_path) -> None:
    """Liquid clustering uses the clustering strategy: every file is a candidate (minFileSize does not
    apply), bins are ZCube-sized and a single-file bin is still rewritten, so no size model fits."""
    t = st.clustered(delta_spark, tmp_path / "t")
    sizes = [a["size"] for a in st.live_adds(t.path)]
    n = len(sizes)
    assert bins_delta_spark(sizes, 1_000_000, 1) == []
    metrics, added, removed = _optimize(delta_spark, t.path, None, {MIN_FILE_SIZE: "1", MAX_FILE_SIZE: "1000000"})
    assert len(removed) == metrics["numFilesRemoved"] == n and len(added) == 1
    assert delta_spark.read.format("delta").load(t.path).count() == t.rows



def _random_dv_table(seed: int) -> tuple[list[tuple[str, int]], dict[int, int], int, int, float]:
    """2-3 days of 4-8 files (as _random_table) and, per file, the modulus of the rows a DELETE takes from it
    (every m-th row: none, ~2%, 10% or 50%), the sizes' bounds and a deleted-rows ratio."""
    rng = random.Random(seed)
    days = [f"2024-03-0{i + 1}" for i in range(rng.choice([2, 3]))]
    max_fs = rng.randint(60_000, 120_000)
    min_fs = int(max_fs * rng.uniform(0.1, 0.4))
    spec = [(d, rng.choice([5, 40, 2500] + [rng.randint(200, 900)] * 4)) for d in days for _ in range(rng.randint(4, 8))]
    rng.shuffle(spec)
    deletes = {fid: m for fid in range(len(spec)) if (m := rng.choice([0, 0, 50, 10, 10, 2]))}
    return spec, deletes, max_fs, min_fs, rng.choice([0.05, 0.05, 0.2])


@pytest.mark.parametrize("seed", [0, 3])
def test_compactor_plans_what_optimize_rewrites_on_deletion_vector_tables(delta_spark, tmp_path, seed: int) -> None:
    """compactor's plan of a random table with deletion vectors (soft-deleted shares from 0 to 50% per file, files
    below and above minFileSize, ratio 0.05 or 0.2) lists exactly the files, each with its deletion vector,
    that delta-spark's OPTIMIZE then removes, and as many output files as OPTIMIZE adds: the local engine's
    plan (compactor's rewrite drops the deleted rows) and the spark engine's native one alike. The seeds are
    chosen so that a file above minFileSize is planned for its deletion vector."""
    import datetime as dt

    from compactor.formats.delta import FORMAT
    from compactor.models.table import TableLocation
    from compactor.planning.actions import RewriteAction
    from compactor.policy.model import Compaction, TablePolicy, Triggers
    from compactor.project.model import Target
    from compactor.tasks.plan import build_plan

    spec, deletes, max_fs, min_fs, ratio = _random_dv_table(seed)
    t = st.sized_files(delta_spark, tmp_path / "t", spec, properties={"delta.enableDeletionVectors": "true"})
    cond = " OR ".join(f"(id DIV 1000000 = {fid} AND id % {m} = 0)" for fid, m in deletes.items())
    delta_spark.sql(f"DELETE FROM delta.`{t.path}` WHERE {cond}")
    adds = st.live_adds(t.path)
    by_path = {unquote(a["path"]): a for a in adds}
    plans = {}
    for engine, method in (("local", "rewrite"), ("spark", "optimize")):
        policy = TablePolicy(name="t", path=t.path, compaction=Compaction(
            target_file_size=max_fs, min_file_size=min_fs, method=method,
            triggers=Triggers(min_input_files=2, max_deleted_rows_ratio=ratio)))
        state = FORMAT.read_state(TableLocation(t.path), policy)
        (table,) = build_plan([policy], {"t": state}, now=dt.datetime.now(dt.UTC), target=Target(engine=engine),
                              project_name="tests").tables
        assert not any(s.reason == "unsupported" for s in table.skipped), table.skipped
        plans[engine] = [a for a in table.actions if isinstance(a, RewriteAction)]
    actions = plans["local"]
    planned = {_dv_key(by_path[p]) for a in actions for p in a.input_paths}
    assert planned == {_dv_key(by_path[p]) for a in plans["spark"] for p in a.input_paths}
    assert any(by_path[p].get("deletionVector") and by_path[p]["size"] >= min_fs
               for a in actions for p in a.input_paths), (spec, deletes, max_fs, min_fs, ratio)

    metrics, added, removed = _optimize(delta_spark, t.path, None, {MIN_FILE_SIZE: str(min_fs), MAX_FILE_SIZE: str(max_fs),
                                                                    MAX_DELETED_ROWS_RATIO: str(ratio)})
    assert {_dv_key(r) for r in removed} == planned, (spec, deletes, max_fs, min_fs, ratio)
    assert len(added) == sum(a.expected_output_files for a in actions)
