"""The sink apply refuses what it cannot do safely, and changes nothing when it does."""

from __future__ import annotations

import datetime as dt
import hashlib
import shutil
from pathlib import Path

from compactor.formats.file_sink.state import read_sink_state
from compactor.policy.model import Compaction, Sink, TablePolicy, Triggers
from compactor.project.model import Target
from compactor.tasks.apply import apply_plan
from compactor.tasks.plan import build_plan
from tests.sink.helpers import make_manual_sink


def digest(root: Path) -> dict[str, str]:
    """Every file's content, except the table lease (taken by every apply, whatever it then refuses)."""
    return {str(p.relative_to(root)): hashlib.sha256(p.read_bytes()).hexdigest()
            for p in sorted(root.rglob("*")) if p.is_file() and p.name not in ("lease.json", ".lease.json.lock")}


def compact_plan(out: Path):
    policy = TablePolicy(name="s", format="spark_file_sink", path=str(out),
                         compaction=Compaction(target_file_size=64 << 20, min_file_size=32 << 20,
                                               triggers=Triggers(min_input_files=2)),
                         sink=Sink(quiet_period=0, downstream_streaming_readers="none"))
    return build_plan([policy], {"s": read_sink_state(str(out))}, now=dt.datetime.now(dt.UTC),
                      target=Target(engine="local"), project_name="t")


def test_copied_sink_whose_log_names_the_original_is_refused(tmp_path: Path) -> None:
    original, copy = tmp_path / "orig", tmp_path / "copy"
    make_manual_sink(original, batches=7)
    shutil.copytree(original, copy)  # the log still holds file:// URIs of `orig`
    before = digest(original), digest(copy)
    p = compact_plan(copy)
    assert p.tables[0].actions
    run = apply_plan(p, target=Target(engine="local"))
    assert not run.ok
    assert all("outside" in (r.error or "") for r in run.results if r.status != "success")
    assert (digest(original), digest(copy)) == before


def test_same_sink_compacts_in_place(tmp_path: Path) -> None:
    out = tmp_path / "s"
    make_manual_sink(out, batches=7)
    run = apply_plan(compact_plan(out), target=Target(engine="local"))
    assert run.ok, [r.error for r in run.results]
    assert read_sink_state(str(out)).extra.compact_entries == 2  # one file per partition
