"""The checks of compactor's commits in the delta-spark fuzzer (tests/fuzz/spark_compactor.py) can fail: on a
log written here, a commit of compactor's that adds a file with a deletion vector, says dataChange true,
removes a file no planned action listed (or one REORG rewrote that the purge's result does not report), or
adds other rows than its removed files held less their deleted rows, is each a Failure; the right commit is
not. No Spark: the log is JSON."""

from __future__ import annotations

import json
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest

from tests.fuzz.spark_checks import Failure, LogReplay
from tests.fuzz.spark_compactor import check_commits, compactor_commits

DV = {"storageType": "u", "pathOrInlineDv": "ab" + "0" * 20, "offset": 1, "sizeInBytes": 34, "cardinality": 3}


def _add(path: str, rows: int, dv: dict[str, Any] | None = None, change: bool = True) -> dict[str, Any]:
    a = {"path": path, "partitionValues": {}, "size": 100, "modificationTime": 0, "dataChange": change,
         "stats": json.dumps({"numRecords": rows})}
    return {"add": {**a, "deletionVector": dv} if dv else a}


def _remove(path: str, dv: dict[str, Any] | None = None) -> dict[str, Any]:
    r = {"path": path, "deletionTimestamp": 1, "dataChange": False}
    return {"remove": {**r, "deletionVector": dv} if dv else r}


def _table(t: Path, ours: list[dict[str, Any]]) -> LogReplay:
    log = t / "_delta_log"
    log.mkdir(parents=True)
    first = [{"protocol": {"minReaderVersion": 1, "minWriterVersion": 2}},
             {"metaData": {"id": "x", "format": {"provider": "parquet"}, "partitionColumns": [], "configuration": {},
                           "schemaString": json.dumps({"type": "struct", "fields": [
                               {"name": n, "type": "long", "nullable": True, "metadata": {}} for n in ("p", "id", "val")]})}},
             _add("a.parquet", 10, DV), _add("b.parquet", 5), _add("c.parquet", 4)]
    info = {"commitInfo": {"operation": "OPTIMIZE", "userMetadata": json.dumps({"compactor.action": "run:t:0"})}}
    for v, actions in enumerate([first, [info, *ours]]):
        (log / f"{v:020d}.json").write_text("\n".join(json.dumps(a) for a in actions) + "\n")
    return LogReplay(t).update()


def _plan(action_type: str = "compact", inputs: tuple[str, ...] = ("a.parquet", "b.parquet")) -> Any:
    return SimpleNamespace(tables=[SimpleNamespace(actions=[SimpleNamespace(type=action_type, input_paths=inputs)])])


def _run(note: str | None = None) -> Any:
    return SimpleNamespace(results=[SimpleNamespace(details=SimpleNamespace(note=note))])


RIGHT = [_remove("a.parquet", DV), _remove("b.parquet"), _add("ab.parquet", 12, change=False)]


def test_a_right_commit_passes_and_is_found_by_its_marker(tmp_path: Path) -> None:
    replay = _table(tmp_path, RIGHT)
    assert list(compactor_commits(replay, 0)) == [1]
    did = check_commits(replay, 0, _plan(), _run())
    assert did == {"compact commits checked": 1, "compact: files with deletion vectors rewritten": 1}


@pytest.mark.parametrize(("ours", "plan", "note", "error"), [
    ([*RIGHT[:2], _add("ab.parquet", 12, DV, change=False)], _plan(), None, "added 1 file.s. with a deletion vector"),
    ([*RIGHT[:2], _add("ab.parquet", 12, change=True)], _plan(), None, "1 action.s. with dataChange true"),
    ([*RIGHT[:2], _add("ab.parquet", 15, change=False)], _plan(), None, "added 15 row.s. for the 12"),
    ([*RIGHT, _remove("c.parquet"), _add("c2.parquet", 4, change=False)], _plan(), None,
     r"removed 1 file.s. no planned action listed: \['c.parquet'\]"),
    ([*RIGHT, _remove("c.parquet"), _add("c2.parquet", 4, change=False)], _plan("purge"), None,
     "REORG removed 1 unplanned file.s. its result does not report"),
])
def test_a_wrong_commit_fails(tmp_path: Path, ours: list[dict[str, Any]], plan: Any, note: str | None,
                              error: str) -> None:
    replay = _table(tmp_path, ours)
    with pytest.raises(Failure, match=error):
        check_commits(replay, 0, plan, _run(note))


def test_reorgs_unplanned_files_pass_when_its_result_reports_them(tmp_path: Path) -> None:
    replay = _table(tmp_path, [*RIGHT, _remove("c.parquet"), _add("c2.parquet", 4, change=False)])
    did = check_commits(replay, 0, _plan("purge"), _run("REORG also rewrote 1 file(s) the plan did not list"))
    assert did["purge: unplanned files REORG rewrote, reported"] == 1
