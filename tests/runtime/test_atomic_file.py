"""Files compactor writes whole (compactor/runtime/atomic_file.py): run results, history, plans, metrics
and the user-cache notes. Each writer renames its own temporary file, so writers racing on one file never
fail, a reader never sees a part of a file, and a failed write leaves the old file and no temporary one."""

from __future__ import annotations

import json
import threading
from pathlib import Path

import pytest

from compactor.models.results import RunResults
from compactor.runtime.atomic_file import replace_with, replacing
from compactor.tasks.apply import write_run_results


def _race(n_threads: int, rounds: int, write) -> list[BaseException]:
    errors: list[BaseException] = []
    start = threading.Barrier(n_threads)

    def writer(k: int) -> None:
        start.wait()
        for i in range(rounds):
            try:
                write(k, i)
            except BaseException as e:  # noqa: BLE001 - collected for the assertion
                errors.append(e)

    threads = [threading.Thread(target=writer, args=(k,)) for k in range(n_threads)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    return errors


def test_writers_racing_on_one_file_never_fail_and_leave_one_whole_content(tmp_path: Path) -> None:
    path = tmp_path / "f.json"
    contents = {(k, i): json.dumps({"writer": k, "round": i, "pad": "x" * (1000 + 37 * k)}) for k in range(6)
                for i in range(40)}
    seen: list[str] = []
    done = threading.Event()

    def reader() -> None:
        while not done.is_set():
            if path.exists():
                seen.append(path.read_text(encoding="utf-8"))

    r = threading.Thread(target=reader)
    r.start()
    errors = _race(6, 40, lambda k, i: replace_with(path, contents[(k, i)]))
    done.set()
    r.join()
    assert errors == []
    assert path.read_text(encoding="utf-8") in contents.values()
    assert seen and all(text in contents.values() for text in seen)  # never a part of a file
    assert sorted(p.name for p in tmp_path.iterdir()) == ["f.json"]  # no temporary file left


def test_two_applies_writing_run_results_at_once_both_succeed(tmp_path: Path) -> None:
    """Two applies of one project (say, two --select jobs) finishing together: with one shared temporary
    name, one renamed the other's file away and failed after its commits had landed."""
    runs = [RunResults(run_id=f"2026112{k}T000000Z-r{k}", compactor_version="test", started_at="2026-11-26T00:00:00Z",
                       finished_at="2026-11-26T00:00:01Z", engine="local", engine_versions={},
                       target={"name": "dev"}) for k in range(2)]
    errors = _race(2, 60, lambda k, i: write_run_results(runs[k], tmp_path))
    assert errors == []
    assert json.loads((tmp_path / "run_results.json").read_text())["run_id"] in {r.run_id for r in runs}
    assert not list(tmp_path.rglob("*.tmp"))


def test_a_failed_write_keeps_the_old_file_and_leaves_no_temporary_file(tmp_path: Path) -> None:
    path = replace_with(tmp_path / "plan.json", "old\n")
    with pytest.raises(RuntimeError), replacing(path) as f:
        f.write("half of the new")
        raise RuntimeError("the writer failed")
    assert path.read_text() == "old\n"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["plan.json"]


def test_bytes_and_text_are_written_as_given(tmp_path: Path) -> None:
    assert replace_with(tmp_path / "b", b"\x00\xff").read_bytes() == b"\x00\xff"
    assert replace_with(tmp_path / "t", "héllo ✓", fsync=True).read_text(encoding="utf-8") == "héllo ✓"
