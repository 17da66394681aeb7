"""compactor.runtime.exit: a finished command ends without the interpreter's teardown, yet with its exit
status, its atexit handlers run and its output flushed; while a non-daemon thread runs, the normal exit
(which waits for it) is used instead. Real processes."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

SCRIPT = """
import atexit, sys, threading, time
from pathlib import Path
from compactor.runtime.exit import exit_without_teardown

out = Path(sys.argv[1])
code = eval(sys.argv[2])
class Teardown:  # noticed only when the interpreter tears its modules down
    def __del__(self):
        (out / "teardown").write_text("ran")
keep = Teardown()
atexit.register(lambda: (out / "atexit").write_text("ran"))
if sys.argv[3] == "thread":
    def late():
        time.sleep(0.5)
        (out / "thread").write_text("finished")
    threading.Thread(target=late).start()
sys.stdout.write("buffered, no newline")
exit_without_teardown(SystemExit(code))
"""


def _run(tmp_path: Path, code: str, thread: bool) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-c", SCRIPT, str(tmp_path), code, "thread" if thread else "-"],
                          capture_output=True, text=True, timeout=60)


@pytest.mark.parametrize(("code", "status"), [("None", 0), ("0", 0), ("2", 2), ("-1", 255), ("'bad input'", 1)])
def test_the_status_output_and_atexit_handlers_are_kept_and_the_teardown_skipped(tmp_path: Path, code: str,
                                                                                status: int) -> None:
    r = _run(tmp_path, code, thread=False)
    assert r.returncode == status, r.stderr
    assert r.stdout == "buffered, no newline"
    assert (tmp_path / "atexit").read_text() == "ran"
    assert not (tmp_path / "teardown").exists()
    assert ("bad input" in r.stderr) == (code == "'bad input'")


def test_a_running_thread_gets_the_normal_exit_which_waits_for_it(tmp_path: Path) -> None:
    r = _run(tmp_path, "3", thread=True)
    assert r.returncode == 3, r.stderr
    assert (tmp_path / "thread").read_text() == "finished"
    assert (tmp_path / "atexit").read_text() == "ran" and (tmp_path / "teardown").read_text() == "ran"


def test_under_a_profiler_the_normal_exit_runs_and_the_profile_is_written(tmp_path: Path) -> None:
    script = tmp_path / "script.py"
    script.write_text(SCRIPT)
    stats = tmp_path / "profile.out"
    r = subprocess.run([sys.executable, "-m", "cProfile", "-o", str(stats), str(script), str(tmp_path), "4", "-"],
                       capture_output=True, text=True, timeout=60)
    assert stats.stat().st_size > 0, r.stderr
    assert (tmp_path / "teardown").read_text() == "ran" and (tmp_path / "atexit").read_text() == "ran"


def test_main_ends_with_system_exit_for_callers_and_the_program_runs_through_run() -> None:
    """compactor.cli.main() is embeddable (its SystemExit reaches the caller's finally); the program
    (console script, python -m compactor) is compactor.cli.run, which ends without the teardown."""
    code = ("import sys\nfrom compactor.cli import main\nsys.argv = ['compactor', '--version']\n"
            "try:\n    main()\nfinally:\n    print('after main')\n")
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
    assert r.returncode == 0 and "compactor" in r.stdout and r.stdout.rstrip().endswith("after main"), r.stderr
    r = subprocess.run([sys.executable, "-m", "compactor", "--version"], capture_output=True, text=True, timeout=60)
    assert r.returncode == 0 and "compactor" in r.stdout, r.stderr
    import tomllib

    scripts = tomllib.loads((Path(__file__).parents[2] / "pyproject.toml").read_text())["project"]["scripts"]
    assert scripts["compactor"] == "compactor.cli:run"
