"""`compactor compile`: writer settings per streaming policy, text and json."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

from click.testing import CliRunner

import compactor
from compactor.cli import cli

EXAMPLE = Path(compactor.__file__).parent / "example_project"


def test_compile_example_project_json_and_text(tmp_path: Path) -> None:
    proj = tmp_path / "p"
    shutil.copytree(EXAMPLE, proj)
    sink = proj / "tables" / "clicks_sink.yml"
    sink.write_text(sink.read_text().replace("      grace_period: 1h", "      grace_period: 1h\n      retention: 7d\n"
                                             "      cleanup_delay: 10m"))
    res = CliRunner().invoke(cli, ["compile", "--project-dir", str(proj), "--format", "json"])
    assert res.exit_code == 0, res.output
    (pol,) = json.loads(res.output)["streaming_policies"]  # only the sink policy, not the Delta ones
    assert pol["table"] == "clicks_sink"
    assert pol["spark_conf"] == {"spark.sql.streaming.fileSink.log.compactInterval": "3",
                                 "spark.sql.streaming.minBatchesToRetain": "100",
                                 "spark.sql.streaming.fileSink.log.cleanupDelay": "600000"}
    assert pol["write_stream_options"] == {"retention": "7d"}
    res = CliRunner().invoke(cli, ["compile", "--project-dir", str(proj)])
    assert res.exit_code == 0
    assert '.writeStream.option("retention", "7d")' in res.output


def test_compile_invalid_policy_fails(tmp_path: Path) -> None:
    proj = tmp_path / "p"
    shutil.copytree(EXAMPLE, proj)
    (proj / "tables" / "clicks_sink.yml").write_text("version: 1\ntables:\n  - name: x\n    format: nope\n")
    res = CliRunner().invoke(cli, ["compile", "--project-dir", str(proj)])
    assert res.exit_code != 0
