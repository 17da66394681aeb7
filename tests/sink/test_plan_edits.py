"""An edited plan may not delete or hide a file sink's data (finding 6 of issue 18): inserted
``sink_delete_replaced`` and ``sink_prune`` actions are refused (exit 2) and nothing changes."""

from __future__ import annotations

import hashlib
import json
from pathlib import Path

import pytest
from click.testing import CliRunner

from compactor.cli import cli
from compactor.planning.actions import digest_paths
from compactor.planning.plan import plan_digest
from tests.sink.helpers import make_manual_sink


def _project(tmp_path: Path) -> tuple[Path, Path]:
    sink = tmp_path / "lake" / "sink"
    make_manual_sink(sink, batches=7, interval=3)
    (tmp_path / "lake" / "outside.parquet").write_bytes(b"not the sink's")
    proj = tmp_path / "proj"
    (proj / "policies").mkdir(parents=True)
    (proj / "compactor.yml").write_text("name: p\n")
    (proj / "policies" / "s.yml").write_text(
        f"version: 1\ntables:\n  - name: s\n    path: {sink}\n    format: spark_file_sink\n"
        "    compaction: {target_file_size: 1MiB, min_file_size: 512KiB, triggers: {min_input_files: 2}}\n"
        "    sink: {quiet_period: 0s, downstream_streaming_readers: none}\n")
    r = CliRunner().invoke(cli, ["plan", "--project-dir", str(proj)], catch_exceptions=False)
    assert r.exit_code == 0, r.output
    return sink, proj


def _tree(root: Path) -> str:
    h = hashlib.sha256()
    for f in sorted(root.rglob("*")):
        h.update(str(f).encode())
        if f.is_file():
            h.update(f.read_bytes())
    return h.hexdigest()


def _insert(plan_file: Path, action: dict) -> None:
    doc = json.loads(plan_file.read_text())
    guards = {k: v for k, v in doc["tables"][0]["actions"][0]["params"].items()
              if k in ("quiet_period", "checkpoint", "writer_stopped_check", "downstream_streaming_readers",
                       "grace_period", "latest_compact", "latest_batch")}
    action["params"] = {**guards, **action["params"]}
    doc["tables"][0]["actions"].insert(0, action)
    doc.pop("digest")
    doc["digest"] = plan_digest(doc)  # what a deliberate editor does
    plan_file.write_text(json.dumps(doc))


def _base(version: int | None, files: list[str], bins: list[list[str]]) -> dict:
    return {"partition": {}, "input_files": len(files or [p for b in bins for p in b]), "input_bytes": 0,
            "expected_output_files": 0, "expected_output_bytes": 0, "rows": None,
            "precondition": {"table_version": version, "digest": digest_paths(files or [p for b in bins for p in b])},
            "bins": bins, "reason": "inserted"}


@pytest.mark.parametrize("target", ["_spark_metadata/5.compact", "../outside.parquet"])
def test_finding_6_inserted_sink_delete_replaced_refused(tmp_path: Path, target: str) -> None:
    sink, proj = _project(tmp_path)
    plan_file = proj / "target" / "plan.json"
    files = [(sink / target).as_uri() if ".." not in target else f"file://{sink}/{target}"]
    _insert(plan_file, {"type": "sink_delete_replaced", **_base(None, files, []), "params": {"files": files}})
    before = _tree(tmp_path / "lake")
    r = CliRunner().invoke(cli, ["apply", str(plan_file), "--project-dir", str(proj)], catch_exceptions=False)
    assert r.exit_code == 2, r.output
    assert "no action may touch" in r.output or "not a normalised path" in r.output, r.output
    assert _tree(tmp_path / "lake") == before


def test_finding_6_inserted_sink_prune_refused(tmp_path: Path) -> None:
    sink, proj = _project(tmp_path)
    plan_file = proj / "target" / "plan.json"
    listed = [json.loads(line)["path"] for line in (sink / "_spark_metadata" / "5.compact").read_text().splitlines()[1:]]
    _insert(plan_file, {"type": "sink_prune", **_base(None, [], [listed[:12]]),
                        "params": {"retention": 1, "horizon_ms": 10**15, "delete_files": False}})
    before = _tree(tmp_path / "lake")
    r = CliRunner().invoke(cli, ["apply", str(plan_file), "--project-dir", str(proj)], catch_exceptions=False)
    assert r.exit_code == 2, r.output
    assert "does not enable manifest pruning" in r.output, r.output
    assert _tree(tmp_path / "lake") == before
