"""The deletion gate on S3 (moto; issue 36): a delta-spark table with deletion vectors and change data feed,
copied to the store as Spark wrote it, vacuumed by compactor at zero retention on the local engine. Every
removed file, expired deletion vector, change data file and orphan goes; no deletion vector a live file
uses does (delta-rs' dry run named them all). delta-rs reads every row from the store, and delta-spark
reads every row of the table copied back."""

from __future__ import annotations

import time
import uuid
from pathlib import Path

import pytest
from deltalake import DeltaTable, QueryBuilder

from compactor.formats.delta.read.log_replay import replay
from compactor.models.table import TableLocation
from compactor.runtime.storage import Storage
from compactor.tasks.apply import apply_plan
from tests.apply.helpers import listed_vacuum, one_action_plan
from tests.objectstore.helpers import target
from tests.spark_tables import deletion_vectors_cdf


def _copy_up(local: Path, store: Storage) -> None:
    for p in sorted(local.rglob("*")):
        if p.is_file():
            store.write_bytes(p.relative_to(local).as_posix(), p.read_bytes())


def _copy_down(store: Storage, local: Path) -> None:
    for o in store.list(""):
        dst = local / o.path
        dst.parent.mkdir(parents=True, exist_ok=True)
        dst.write_bytes(store.read_bytes(o.path))


@pytest.mark.delta_jars
def test_vacuum_on_s3_keeps_every_deletion_vector_the_table_uses(delta_spark, s3_server, tmp_path: Path) -> None:
    local = tmp_path / "written"
    built = deletion_vectors_cdf(delta_spark, local)
    delta_spark.sql(f"ALTER TABLE delta.`{local}` SET TBLPROPERTIES "
                    "('delta.deletedFileRetentionDuration' = 'interval 0 hours')")
    uri, so = s3_server.uri(f"dv-{uuid.uuid4().hex[:8]}"), dict(s3_server.storage_options)
    store = Storage(uri, so)
    _copy_up(local, store)
    store.write_bytes("date=2024-01-01/part-99999-orphan.c000.snappy.parquet", b"nobody's")
    time.sleep(1.1)  # older than the zero retention by the store's whole-second modification times
    state = replay(TableLocation(uri, so))
    used = {r.dv.path for r in state.live.values() if r.dv is not None}
    assert used, "the table's live files carry deletion vectors"
    action = listed_vacuum(uri, so)
    listed = set(action.files or ())
    assert "date=2024-01-01/part-99999-orphan.c000.snappy.parquet" in listed
    assert any(f.startswith("_change_data/") for f in listed) and any("date=2024-01-03" in f for f in listed)
    assert not listed & used, f"listed deletion vectors live files use: {sorted(listed & used)}"
    run = apply_plan(one_action_plan(uri, action, so), target=target(so))
    (r,) = run.results
    assert r.status == "success", r.error
    assert set(r.details.files) == listed
    left = {o.path for o in store.list("")}
    assert used <= left and not listed & left
    out = QueryBuilder().register("t", DeltaTable(uri, storage_options=so)).execute("SELECT id FROM t").read_all()
    assert sorted(out.column("id").to_pylist()) == list(built.extra["ids"])
    back = tmp_path / "read-back"
    _copy_down(store, back)
    assert sorted(r[0] for r in delta_spark.sql(f"SELECT id FROM delta.`{back}`").collect()) == list(built.extra["ids"])
