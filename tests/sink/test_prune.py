"""sink_prune: offline manifest retention with the same atomic .compact replace."""

from __future__ import annotations

import datetime as dt
import os
import time
from pathlib import Path

import pytest

from compactor.formats.file_sink.log import entry_local_path, list_log
from compactor.formats.file_sink.state import read_sink_state
from compactor.policy.model import Compaction, Sink, TablePolicy
from compactor.project.model import Target
from compactor.tasks.apply import apply_plan
from compactor.tasks.plan import build_plan
from tests.sink.helpers import make_manual_sink


def plan(out: Path, *, delete_files: bool, grace: int = 3600, now: dt.datetime | None = None):
    policy = TablePolicy(name="s", format="spark_file_sink", path=str(out), compaction=Compaction(enabled=False),
                         sink=Sink(quiet_period=0, downstream_streaming_readers="none", retention=86400, prune=True,
                                   prune_delete_files=delete_files, grace_period=grace))
    return build_plan([policy], {"s": read_sink_state(str(out))}, now=now or dt.datetime.now(dt.UTC),
                      target=Target(engine="local"), project_name="t")


@pytest.mark.parametrize("delete_files", [False, True])
def test_prune_drops_old_entries_atomically(tmp_path: Path, delete_files: bool) -> None:
    out = tmp_path / "s"
    make_manual_sink(out, batches=7, old_batches=2)
    names = sorted(os.listdir(out / "_spark_metadata"))
    p = plan(out, delete_files=delete_files)
    (a,) = p.tables[0].actions
    assert a.type == "sink_prune" and a.input_files == 4  # batches 0 and 1, two partitions
    run = apply_plan(p, target=Target(engine="local"))
    assert run.ok, [r.error for r in run.results]
    assert sorted(os.listdir(out / "_spark_metadata")) == names  # no batch id created, no .compact deleted
    state = read_sink_state(str(out))
    assert state.extra.compact_entries == 8 and state.file_count == 10
    assert all(entry_local_path(x, out).exists() for x in state.files.column("path").to_pylist())
    ledger = out / "_compactor" / "sink_ledger.json"
    assert ledger.exists() == delete_files
    if delete_files:
        time.sleep(1.1)
        later = plan(out, delete_files=True, grace=1)
        assert [x.type for x in later.tables[0].actions] == ["sink_delete_replaced"]
        run = apply_plan(later, target=Target(engine="local"))
        assert run.ok
        assert run.results[0].details.to_dict() == {"deleted": 0, "still_referenced": 4}  # old log files list them
        for name in ("0", "1", "2.compact"):  # what the writer's log cleanup removes eventually
            (out / "_spark_metadata" / name).unlink()
        run = apply_plan(plan(out, delete_files=True, grace=1), target=Target(engine="local"))
        assert run.ok and run.results[0].details.deleted == 4
        assert len(list(out.rglob("*.parquet"))) == 10
    assert list_log(out / "_spark_metadata").latest_compact.path.name == "5.compact"
