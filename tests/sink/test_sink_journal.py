"""A sink rewrite's crash journal is runtime/journal.py's (formats/file_sink/recovery.py): a kill at each
sink crash point is recovered (unlisted outputs and staging folders deleted; after the manifest swap the
replaced inputs go to the ledger, never deleted or forgotten), a run that may still be alive is never
cleaned up (the sink refuses, nothing changed), and the previous release's `_compactor/sink_journal.json`
is still recovered. Local engine, sinks in Spark's layout built without Spark."""

from __future__ import annotations

import hashlib
import json
import os
import signal
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest

from compactor.errors import SinkGuardError
from compactor.formats import get_format
from compactor.formats.file_sink.location import SinkRoot
from compactor.formats.file_sink.recovery import LEGACY_JOURNAL
from compactor.formats.file_sink.state import read_sink_state
from compactor.models.table import TableLocation
from compactor.project.model import Target
from compactor.runtime import journal, liveness
from compactor.runtime.journal import ActionJournal, JournalEntry, journal_dir, pending_journals
from compactor.tasks.apply import apply_plan
from compactor.tasks.plan_file import write_plan
from tests.sink.helpers import make_manual_sink
from tests.sink.test_apply_refusals import compact_plan

SCRIPT = textwrap.dedent("""
    import sys
    from compactor.tasks.apply import apply_plan
    from compactor.tasks.plan_file import load_plan
    from compactor.project.model import Target
    apply_plan(load_plan(sys.argv[1]), target=Target(engine="local"))
""")
POINTS = ("sink.journal_written", "sink.before_swap", "sink.after_swap")


def _recover(out: Path) -> list[str]:
    return get_format("spark_file_sink").recover(TableLocation(str(out)), grace_s=3600)


def _ids(out: Path) -> list[int]:
    import pyarrow.parquet as pq

    sink = SinkRoot(str(out))
    rows: list[int] = []
    for raw in read_sink_state(str(out)).files.column("path").to_pylist():
        rows += pq.read_table(sink.location(sink.rel(raw))).column("id").to_pylist()
    return sorted(rows)


def _listed(out: Path) -> set[str]:
    sink = SinkRoot(str(out))
    return {sink.rel(p) for p in read_sink_state(str(out)).files.column("path").to_pylist()}


def _ledger(out: Path) -> list[str]:
    f = out / "_compactor" / "sink_ledger.json"
    return sorted(e["file"] for e in json.loads(f.read_text())) if f.exists() else []


def _digest(root: Path) -> dict[str, str]:
    return {str(p.relative_to(root)): hashlib.sha256(p.read_bytes()).hexdigest()
            for p in sorted(root.rglob("*")) if p.is_file() and p.name not in ("lease.json", ".lease.json.lock")}


def _write_legacy(out: Path, text: str) -> None:
    (out / LEGACY_JOURNAL).parent.mkdir(exist_ok=True)
    (out / LEGACY_JOURNAL).write_text(text)


def _killed_at(tmp_path: Path, point: str) -> tuple[Path, list[int]]:
    """A sink whose first rewrite was SIGKILLed at ``point`` (a separate process)."""
    out = tmp_path / "s"
    make_manual_sink(out, batches=7)
    ids = _ids(out)
    plan_file = tmp_path / "plan.json"
    write_plan(compact_plan(out), plan_file)
    proc = subprocess.run([sys.executable, "-c", SCRIPT, str(plan_file)], capture_output=True, text=True,
                          env={**os.environ, "COMPACTOR_CRASH_AT": point})
    assert proc.returncode == -signal.SIGKILL, proc.stderr
    assert _ids(out) == ids  # the old or the new manifest, never a mix
    return out, ids


def _check_recovered(out: Path, ids: list[int], point: str, entry: JournalEntry) -> None:
    listed = _listed(out)
    swapped = any(rel in listed for rel in entry.outputs)
    assert swapped == (point == "sink.after_swap")
    assert not [p for p in out.rglob("*compactor*.parquet") if p.relative_to(out).as_posix() not in listed]
    assert not list(out.rglob("_compactor_staging_*"))
    assert not pending_journals(str(out)) and not (out / LEGACY_JOURNAL).exists()
    sink = SinkRoot(str(out))
    if swapped:  # the replaced inputs wait out the grace period in the ledger, still on disk
        assert _ledger(out) == sorted(sink.location(r) for r in entry.inputs)
        assert all((out / r).exists() and r not in listed for r in entry.inputs)
    else:
        assert _ledger(out) == [] and all(r in listed for r in entry.inputs)
    assert _ids(out) == ids
    run = apply_plan(compact_plan(out), target=Target(engine="local"))  # a re-run converges
    assert run.ok, [r.error for r in run.results]
    assert _ids(out) == ids and read_sink_state(str(out)).extra.compact_entries == 2


def _the_entry(out: Path) -> JournalEntry:
    [jfile] = journal_dir(str(out)).glob("*.json")
    return JournalEntry(**json.loads(jfile.read_text()))


@pytest.mark.parametrize("point", POINTS)
def test_a_kill_at_each_sink_crash_point_is_recovered(tmp_path: Path, point: str) -> None:
    out, ids = _killed_at(tmp_path, point)
    entry = _the_entry(out)  # the one journal: outputs, staging and inputs relative to the sink root
    assert entry.outputs and entry.staging and len(entry.inputs) == 6
    if point == "sink.journal_written":
        assert _recover(out) == []
    else:
        assert sorted(_recover(out)) == ([] if point == "sink.after_swap" else
                                        sorted(str(out / r) for r in entry.outputs))
    _check_recovered(out, ids, point, entry)


@pytest.mark.parametrize("point", POINTS)
def test_the_previous_releases_sink_journal_is_recovered(tmp_path: Path, point: str) -> None:
    """A sink upgraded while a rewrite of the previous release lay killed: its `_compactor/sink_journal.json`
    (locations, `written_at`, no heartbeat) is recovered by the same rule."""
    out, ids = _killed_at(tmp_path, point)
    entry = _the_entry(out)
    sink = SinkRoot(str(out))
    # what the previous release's run.py _write_journal wrote for this very rewrite
    legacy = {"files": [sink.location(r) for r in entry.outputs], "staging": [sink.location(r) for r in entry.staging],
              "inputs": [sink.location(r) for r in entry.inputs], "identity": entry.identity,
              "written_at": entry.heartbeat_at}
    _write_legacy(out, json.dumps(legacy))
    for jfile in journal_dir(str(out)).glob("*.json"):
        jfile.unlink()
    _recover(out)
    _check_recovered(out, ids, point, entry)


def test_a_legacy_journal_of_a_run_that_may_be_alive_is_refused_untouched(tmp_path: Path) -> None:
    out = tmp_path / "s"
    make_manual_sink(out, batches=7)
    orphan = out / "part=0" / "part-0000-compactor.c000.snappy.parquet"
    orphan.write_bytes(b"PAR1")
    legacy = {"files": [str(orphan)], "staging": [], "inputs": [], "identity": "", "written_at": time.time()}
    _write_legacy(out, json.dumps(legacy))  # another host's run, a moment ago
    before = _digest(out)
    with pytest.raises(SinkGuardError, match="may still be under way.*nothing changed"):
        _recover(out)
    run = apply_plan(compact_plan(out), target=Target(engine="local"))
    assert not run.ok and all("may still be under way" in (r.error or "") for r in run.results)
    assert _digest(out) == before
    legacy["written_at"] = time.time() - 16 * 60  # older than the lease TTL: its lease has expired
    _write_legacy(out, json.dumps(legacy))
    assert _recover(out) == [str(orphan)]
    assert not orphan.exists() and not (out / LEGACY_JOURNAL).exists() and not pending_journals(str(out))


def test_a_torn_legacy_journal_is_dropped(tmp_path: Path) -> None:
    out = tmp_path / "s"
    make_manual_sink(out, batches=7)
    _write_legacy(out, '{"files": ["')
    before = {k: v for k, v in _digest(out).items() if k != LEGACY_JOURNAL}
    assert _recover(out) == []
    assert _digest(out) == before and not pending_journals(str(out))


@pytest.mark.parametrize("who", ["live process", "another host"])
def test_a_rewrite_that_may_still_run_is_never_cleaned_up(tmp_path: Path, who: str) -> None:
    out = tmp_path / "s"
    make_manual_sink(out, batches=7)
    output = out / "part=0" / "part-0000-compactor.c000.snappy.parquet"
    output.write_bytes(b"PAR1")
    (out / "part=0" / "_compactor_staging_x").mkdir()
    (out / "part=0" / "_compactor_staging_x" / "f").write_bytes(b"x")
    with subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"]) as alive:
        try:
            ident = liveness.identity_of(alive.pid) if who == "live process" else ""
            entry = JournalEntry("run-x", "run-x:s:0:sink", str(out), None, outputs=[output.relative_to(out).as_posix()],
                                 staging=["part=0/_compactor_staging_x"], identity=ident, inputs=["part=0/x.parquet"])
            journal.adopt(str(out), entry)
            before = _digest(out)
            with pytest.raises(SinkGuardError, match="nothing changed"):
                _recover(out)
            run = apply_plan(compact_plan(out), target=Target(engine="local"))
            assert not run.ok and all("may still be under way" in (r.error or "") for r in run.results)
            assert _digest(out) == before
        finally:
            alive.kill()
    if who == "another host":  # nothing provable: only a heartbeat older than the lease TTL ends it
        entry.heartbeat_at = time.time() - 16 * 60
        journal.adopt(str(out), entry)
    else:
        time.sleep(0.2)
    assert _recover(out) == [str(output)]
    assert not output.exists() and not (out / "part=0" / "_compactor_staging_x").exists()
    assert not pending_journals(str(out)) and _ledger(out) == []  # the output was never listed: no swap


def test_the_journal_keeps_its_format_for_entries_without_inputs(tmp_path: Path) -> None:
    """Entries without inputs (every Delta rewrite) are written as the previous release wrote them, and an
    entry with inputs is never dropped by a recover that cannot retire them."""
    t = tmp_path / "t"
    t.mkdir()
    with ActionJournal(str(t), "r", "a", 3, outputs=["x.parquet"]) as j:
        assert "inputs" not in json.loads((t / j.path).read_text())
    with ActionJournal(str(t), "r", "b", None, outputs=["y.parquet"], inputs=["z.parquet"]) as j:
        assert json.loads((t / j.path).read_text())["inputs"] == ["z.parquet"]
    entry = JournalEntry("r", "c", str(t), None, outputs=["y.parquet"], inputs=["z.parquet"], ended_at=time.time())
    journal.adopt(str(t), entry)
    (t / "y.parquet").write_bytes(b"y")
    assert journal.recover(str(t), lambda: _Listed(set())) == [] and (t / "y.parquet").exists()
    retired: list[list[str]] = []
    assert journal.recover(str(t), lambda: _Listed({"y.parquet"}), retire=retired.append) == []
    assert retired == [["z.parquet"]] and not pending_journals(str(t))


class _Listed:
    """A deletion gate (runtime/deletion.py) that keeps exactly ``paths``: what a format's log would list."""

    def __init__(self, paths: set[str]) -> None:
        self.paths = paths

    def kept(self, files, folders=()):
        return {f: "listed" for f in files if f in self.paths}
