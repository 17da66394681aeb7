"""Run history files: one per run, sortable, torn or foreign files ignored; `compactor history` options."""

from __future__ import annotations

import json
from pathlib import Path

import jsonschema
import pytest
from click.testing import CliRunner

from compactor.cli.history import command as history_command
from compactor.models.results import ActionResult, RunResults, compute_run_totals
from compactor.planning.vocabulary import rewrite_types
from compactor.policy.schema import load_schema
from compactor.tasks.history import load_history, record_run


def _run(run_id: str, started: str, tables: tuple[str, ...] = ("a",), status: str = "success") -> RunResults:
    results = [ActionResult(t, "compact", {"d": "1"}, status, 4, 1, 4000, 3900, table_version_before=1,
                            table_version_after=2, duration_s=0.25) for t in tables]
    return RunResults(run_id, "0.1", started, started, "local", {"deltalake": "1.6.6"}, {"name": "dev"},
                      results=results, totals=compute_run_totals(results, rewrite_types()))


def test_round_trip_and_order(tmp_path: Path) -> None:
    # the same second in the id: order comes from started_at, not from the random suffix
    late = _run("20260101T000000Z-aaaa", "2026-01-01T00:00:00.900000+00:00")
    early = _run("20260101T000000Z-ffff", "2026-01-01T00:00:00.100000+00:00")
    for r in (late, early):
        path = record_run(tmp_path, r)
        assert path.parent == tmp_path / "history" and path.suffix == ".json"
        jsonschema.validate(json.loads(path.read_text()), load_schema("run_results.schema.json"))
    runs = load_history(tmp_path)
    assert [r.run_id for r in runs] == [early.run_id, late.run_id]
    assert runs[0].to_dict() == early.to_dict()
    assert [r.run_id for r in load_history(tmp_path, last=1)] == [late.run_id]


def test_table_filter_keeps_only_that_tables_results(tmp_path: Path) -> None:
    record_run(tmp_path, _run("20260101T000001Z-1", "2026-01-01T00:00:01+00:00", ("a", "b")))
    record_run(tmp_path, _run("20260101T000002Z-2", "2026-01-01T00:00:02+00:00", ("b",)))
    runs = load_history(tmp_path, table="a")
    assert [r.run_id for r in runs] == ["20260101T000001Z-1"] and {x.table for x in runs[0].results} == {"a"}
    assert len(load_history(tmp_path, table="b")) == 2 and load_history(tmp_path, table="zzz") == []


def test_torn_and_foreign_files_are_not_history(tmp_path: Path) -> None:
    record_run(tmp_path, _run("20260101T000001Z-1", "2026-01-01T00:00:01+00:00"))
    h = tmp_path / "history"
    (h / "20260101T000002Z-torn.json").write_text('{"run_id": "x", "resu')  # killed mid-write (no rename)
    (h / "notes.json").write_text("[1, 2]")
    (h / "other.json").write_text('{"hello": 1}')
    (h / ".20260101T000003Z-x.json.tmp").write_text("{}")
    assert [r.run_id for r in load_history(tmp_path)] == ["20260101T000001Z-1"]
    assert load_history(tmp_path / "nowhere") == []


def test_run_id_cannot_escape_the_history_folder(tmp_path: Path) -> None:
    path = record_run(tmp_path / "t", _run("../../evil", "2026-01-01T00:00:01+00:00"))
    assert path.parent == tmp_path / "t" / "history"
    assert [r.run_id for r in load_history(tmp_path / "t")] == ["../../evil"]


def _project(tmp_path: Path) -> Path:
    p = tmp_path / "proj"
    (p / "policies").mkdir(parents=True)
    (p / "compactor.yml").write_text("name: p\n")
    return p


def test_history_command_text_json_and_options(tmp_path: Path) -> None:
    p = _project(tmp_path)
    record_run(p / "target", _run("20260101T000001Z-1", "2026-01-01T00:00:01+00:00", ("a",)))
    record_run(p / "target", _run("20260101T000002Z-2", "2026-01-01T00:00:02+00:00", ("b",), status="error"))
    cli = CliRunner()
    r = cli.invoke(history_command, ["--project-dir", str(p), "--format", "json", "--table", "a"])
    assert r.exit_code == 0, r.output
    assert [x["run_id"] for x in json.loads(r.output)] == ["20260101T000001Z-1"]
    r = cli.invoke(history_command, ["--project-dir", str(p)], env={"COLUMNS": "200"})
    assert r.exit_code == 0 and "2 run(s)" in r.output and "4 -> 1" in r.output
    row = next(line for line in r.output.splitlines() if "20260101T000002Z-2" in line)
    assert row.rstrip(" │").endswith("failed (1)")  # the failed action is counted
    r = cli.invoke(history_command, ["--project-dir", str(p), "--last", "0"])
    assert r.exit_code == 2 and "--last" in r.output
    r = cli.invoke(history_command, ["--project-dir", str(tmp_path / "missing")])
    assert r.exit_code == 2 and "Traceback" not in r.output


@pytest.mark.parametrize("last", ["1", "5"])
def test_history_command_last(tmp_path: Path, last: str) -> None:
    p = _project(tmp_path)
    for i in range(3):
        record_run(p / "target", _run(f"20260101T00000{i}Z-{i}", f"2026-01-01T00:00:0{i}+00:00"))
    r = CliRunner().invoke(history_command, ["--project-dir", str(p), "--format", "json", "--last", last])
    assert [x["run_id"] for x in json.loads(r.output)] == [f"20260101T00000{i}Z-{i}" for i in range(3)][-int(last):]
