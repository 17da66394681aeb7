"""A repair removes a file whose log path Spark spelled raw (non-ASCII characters not encoded, where
delta-rs' encoding would write ``%C3%A9``): its remove must be spelled as the log spelled the add, or it
retires nothing and the rows stay live twice. The duplicate is made as a writer racing compactor makes one:
compactor compacts a partition named ``é``, then another writer's OPTIMIZE, written by hand as Spark writes
its log (raw paths), rewrites the same inputs from a snapshot read before compactor's commit."""

from __future__ import annotations

import json
import time
from collections import Counter
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
from deltalake import DeltaTable, write_deltalake

from compactor.formats.delta.duplicates.repair import detect, repair
from compactor.models.table import TableLocation
from compactor.project.model import Target
from compactor.tasks.apply import apply_plan
from tests.apply.helpers import plan_for


def _rows(t: Path) -> Counter[int]:
    return Counter(DeltaTable(str(t)).to_pyarrow_table().column("id").to_pylist())


def _log(t: Path) -> list[dict]:
    return [json.loads(line) for f in sorted((t / "_delta_log").glob("*.json"))
            for line in f.read_text(encoding="utf-8").splitlines() if line.strip()]


def test_a_repair_removes_a_raw_spelled_copy_as_the_log_spells_it(tmp_path: Path) -> None:
    t = tmp_path / "t"
    write_deltalake(str(t), pa.table({"id": pa.array([100], pa.int64()), "p": pa.array(["a"])}), partition_by=["p"])
    (t / "p=é").mkdir()
    now = int(time.time() * 1000)
    for i in range(4):  # one commit each, as Spark writes them: the path raw
        rel = f"p=é/part-0000{i}-spark.c000.snappy.parquet"
        pq.write_table(pa.table({"id": pa.array(range(10 * i, 10 * i + 10), pa.int64())}), t / rel)
        add = {"add": {"path": rel, "partitionValues": {"p": "é"}, "size": (t / rel).stat().st_size,
                       "modificationTime": now, "dataChange": True, "stats": json.dumps({"numRecords": 10})}}
        (t / "_delta_log" / f"{i + 1:020d}.json").write_text(json.dumps(add, ensure_ascii=False) + "\n", encoding="utf-8")
    inputs = [a["add"] for a in _log(t) if "add" in a and "é" in a["add"]["path"]]
    assert len(inputs) == 4
    run = apply_plan(plan_for(t), target=Target(), watch_s=0)
    assert run.ok, [r.error for r in run.results]
    assert _rows(t) == Counter([*range(40), 100])
    # the other writer's OPTIMIZE of the same inputs, from its older snapshot: one file holding their rows
    other = "p=é/part-00000-other-optimize.c000.snappy.parquet"
    pq.write_table(pa.table({"id": pa.array(range(40), pa.int64())}), t / other)
    version = DeltaTable(str(t)).version() + 1
    actions = [{"commitInfo": {"timestamp": now, "operation": "OPTIMIZE", "readVersion": 4, "isBlindAppend": False,
                               "operationParameters": {"predicate": "[]"}}},
               *({"remove": {"path": a["path"], "deletionTimestamp": now, "dataChange": False,
                             "partitionValues": {"p": "é"}, "size": a["size"]}} for a in inputs),
               {"add": {"path": other, "partitionValues": {"p": "é"}, "size": (t / other).stat().st_size,
                        "modificationTime": now, "dataChange": False, "stats": json.dumps({"numRecords": 40})}}]
    (t / "_delta_log" / f"{version:020d}.json").write_text(
        "\n".join(json.dumps(a, ensure_ascii=False) for a in actions) + "\n", encoding="utf-8")
    assert _rows(t) == Counter({**{i: 2 for i in range(40)}, 100: 1})
    where = TableLocation(str(t))
    assert detect(where).proposal is not None

    result = repair(where)

    assert result.status == "repaired", result
    assert _rows(t) == Counter([*range(40), 100])
    removes = [a["remove"]["path"] for a in _log(t)[-(len(actions) + 4):] if "remove" in a]
    assert other in removes  # spelled raw, as its add
