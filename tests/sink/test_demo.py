"""build_demo_sink runs a real streaming query and leaves a compactable file-sink output."""

from __future__ import annotations

from pathlib import Path

import pytest

from compactor.formats.file_sink.demo import build_demo_sink
from compactor.formats.file_sink.log import list_log
from compactor.formats.file_sink.state import read_sink_state

pytestmark = pytest.mark.spark


def test_demo_sink_layout(spark, tmp_path: Path) -> None:
    info = build_demo_sink(tmp_path / "clicks_sink", spark=spark, batches=4, rows_per_batch=20,
                           wait_quiet=False)
    assert info.checkpoint == str(tmp_path / "clicks_checkpoint")
    assert (tmp_path / "clicks_checkpoint" / "commits" / "3").exists()
    log = list_log(tmp_path / "clicks_sink" / "_spark_metadata")
    assert log.latest_batch == 3 and log.latest_compact.path.name == "2.compact"
    assert spark.read.parquet(str(tmp_path / "clicks_sink")).count() == 80
    state = read_sink_state(str(tmp_path / "clicks_sink"))
    assert state.partition_columns == ("country",) and state.files.num_rows == info.files and info.files >= 8
