"""The log's own spelling of each live file's path (formats/delta/read/log_replay.py, ``Replay.spellings``): kept
where delta-rs' encoding of the decoded path would spell it otherwise (Spark writes non-ASCII characters raw),
from JSON commits and Parquet checkpoints alike, and the remove compactor writes spells it so."""

from __future__ import annotations

import json
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq

from compactor.formats.delta.apply.log_writer import remove_action
from compactor.formats.delta.read.log_paths import spelled_otherwise
from compactor.formats.delta.read.log_replay import replay
from compactor.models.table import TableLocation

RAW = "city=Malmö/part-0.parquet"  # as Spark writes it
ENCODED = "city=Malm%C3%B6/part-1.parquet"  # as delta-rs writes it
SPACED = "city=a%20b/part-2.parquet"


def _commit(root: Path, version: int, actions: list[dict]) -> None:
    log = root / "_delta_log"
    log.mkdir(parents=True, exist_ok=True)
    (log / f"{version:020d}.json").write_text("\n".join(json.dumps(a, ensure_ascii=False) for a in actions) + "\n")


def _add(path: str) -> dict:
    return {"add": {"path": path, "partitionValues": {}, "size": 1, "modificationTime": 0, "dataChange": True}}


def _table(root: Path) -> None:
    meta = {"metaData": {"id": "t", "format": {"provider": "parquet", "options": {}}, "partitionColumns": ["city"],
                         "schemaString": json.dumps({"type": "struct", "fields": [
                             {"name": "city", "type": "string", "nullable": True, "metadata": {}}]}),
                         "configuration": {}}}
    _commit(root, 0, [{"protocol": {"minReaderVersion": 1, "minWriterVersion": 2}}, meta,
                      _add(RAW), _add(ENCODED), _add(SPACED)])


def test_the_replay_keeps_exactly_the_spellings_delta_rs_would_not_reproduce(tmp_path: Path) -> None:
    _table(tmp_path)
    got = replay(TableLocation(str(tmp_path)))
    assert got.spellings == {"city=Malmö/part-0.parquet": RAW}
    assert not spelled_otherwise("city=Malmö/part-1.parquet", ENCODED)
    assert not spelled_otherwise("city=a b/part-2.parquet", SPACED)
    assert spelled_otherwise("city=a b/x.parquet", "city=a b/x.parquet")  # a raw space: delta-rs writes %20


def test_a_remove_spelled_as_the_add_retires_it_and_its_spelling(tmp_path: Path) -> None:
    _table(tmp_path)
    logical = "city=Malmö/part-0.parquet"
    state = replay(TableLocation(str(tmp_path)))
    action = remove_action(logical, 1, {}, 0, spelled=state.spellings[logical])
    assert action["remove"]["path"] == RAW
    assert remove_action(logical, 1, {}, 0)["remove"]["path"] == "city=Malm%C3%B6/part-0.parquet"
    _commit(tmp_path, 1, [action])
    after = replay(TableLocation(str(tmp_path)))
    assert logical not in {p for p, _ in after.live} and logical not in after.spellings


def test_a_parquet_checkpoint_keeps_the_spelling(tmp_path: Path) -> None:
    """The checkpoint's add path column is read raw too (delta-spark writes its checkpoints in Parquet)."""
    _table(tmp_path)
    add = pa.struct([("path", pa.string()), ("deletionVector", pa.struct([("storageType", pa.string())]))])
    rows = pa.table({"add": pa.array([{"path": RAW, "deletionVector": None},
                                      {"path": ENCODED, "deletionVector": None}], add),
                     "metaData": pa.array([None, None], pa.struct([("partitionColumns", pa.list_(pa.string()))]))})
    meta = pa.table({"add": pa.array([None], add),
                     "metaData": pa.array([{"partitionColumns": ["city"]}], rows.schema.field("metaData").type)})
    pq.write_table(pa.concat_tables([rows, meta]), tmp_path / "_delta_log" / f"{0:020d}.checkpoint.parquet")
    (tmp_path / "_delta_log" / f"{0:020d}.json").unlink()  # only the checkpoint tells
    got = replay(TableLocation(str(tmp_path)))
    assert got.checkpoint_version == 0 and got.spellings == {"city=Malmö/part-0.parquet": RAW}


def test_a_tombstone_of_an_older_vector_keeps_the_live_files_spelling(tmp_path: Path) -> None:
    """A DELETE re-adds a file with a new deletion vector and removes it with the old one; a checkpoint lists
    the live add before the tombstone: the live file keeps its spelling."""
    _table(tmp_path)
    dv = {"storageType": "i", "pathOrInlineDv": "wi5b=000010000siXQKl0rr91000f55c8Xg0@@D72lkbi5=-{L", "sizeInBytes": 40,
          "cardinality": 6}
    readd = {"add": {**_add(RAW)["add"], "deletionVector": dv, "dataChange": True}}
    _commit(tmp_path, 1, [{"remove": {"path": RAW, "deletionTimestamp": 1, "dataChange": True}}, readd])
    state = replay(TableLocation(str(tmp_path)))
    assert state.spellings == {"city=Malmö/part-0.parquet": RAW}
    state.put(True, "city=Malmö/part-0.parquet", None, 1, RAW)  # the old tombstone again, as a checkpoint gives it
    assert state.spellings == {"city=Malmö/part-0.parquet": RAW}
