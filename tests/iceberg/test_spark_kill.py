"""A spark-engine rewrite of a Spark-written Iceberg table killed at each of its crash points
(formats/iceberg/faults.py) loses no row, and the next runs recover and converge: what Spark wrote into the
action's own folder and no snapshot references is deleted through the deletion gate (the journal named the
folder before Spark wrote a file), a commit that landed stays, and plan -> apply -> plan ends with nothing
to do (``--detailed-exitcode`` 0).

The kill is simulated in this process as the format contract suite simulates it (tests/formats/contract/
lake.py): the catalog and the warehouse are snapshotted when the run reaches the point and put back after
it, the lease left naming a process that is gone; a real SIGKILL leaves the same files, and a subprocess
per kill would start a JVM each time. ``COMPACTOR_ICEBERG_KILLS=<n>`` adds ``n`` real SIGKILLs of
``compactor apply`` subprocesses at random moments of the Spark write (long mode, outside CI)."""

from __future__ import annotations

import os
import random
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest

pytest.importorskip("pyiceberg", reason="pyiceberg is not installed (pip install 'compactor[iceberg]')")

from compactor.formats.iceberg.catalog import open_table  # noqa: E402
from compactor.formats.iceberg.faults import COMPACT_CRASH_POINTS  # noqa: E402
from tests.formats.contract.lake import _lease_of_a_dead_process, killed_at  # noqa: E402
from tests.iceberg.test_spark_apply import ROWS, _make, _project, _rows, _unreferenced_outputs  # noqa: E402

pytestmark = [pytest.mark.spark, pytest.mark.iceberg_jars, pytest.mark.delta_jars]


def _converge(project: Any) -> None:
    for _ in range(3):
        r = project.cli("plan", "--detailed-exitcode")
        if r.exit_code == 0:
            return
        assert r.exit_code == 2, r.output
        r = project.cli("apply", str(project.plan_file))
        assert r.exit_code == 0, r.output
    raise AssertionError("plan -> apply did not converge in 3 rounds")


@pytest.mark.parametrize("point", COMPACT_CRASH_POINTS)
def test_a_spark_rewrite_killed_at_a_crash_point_is_recovered_and_converges(
        iceberg_spark: Any, tmp_path: Path, point: str) -> None:
    spark = iceberg_spark
    cat, t = _make(spark, tmp_path, 2)
    before = _rows(spark, t)
    project = _project(tmp_path, cat)
    r = project.cli("plan")
    assert r.exit_code == 0, r.output

    assert killed_at(point, cat.root, tmp_path / "killed", lambda: project.cli("apply", str(project.plan_file)))
    table = open_table(cat.settings(), "db.t")
    _lease_of_a_dead_process(Path(table.location().removeprefix("file:").removeprefix("//")))
    if point != "iceberg.journal_written":
        assert any(p.suffix == ".parquet" for p in Path(cat.root).glob("warehouse/db/t/data/compactor-*/**/*"))

    _converge(project)
    assert _rows(spark, t) == before
    assert _unreferenced_outputs(table) == []
    # a run killed after its commit leaves its entry until an apply with work recovers it: it names only
    # files the table references (checked above: nothing unreferenced is left in any action folder)
    journal = Path(table.location().removeprefix("file:").removeprefix("//")) / "_compactor" / "journal"
    assert len(list(journal.glob("*.json"))) == (1 if point == "iceberg.after_commit" else 0)


KILLS = int(os.environ.get("COMPACTOR_ICEBERG_KILLS", "0"))


@pytest.mark.skipif(KILLS == 0, reason="long mode: set COMPACTOR_ICEBERG_KILLS=<n> for n real SIGKILLs of "
                                       "`compactor apply` at random moments (each starts a JVM)")
def test_real_sigkills_at_random_moments_lose_no_row_and_converge(iceberg_spark: Any, tmp_path: Path) -> None:
    spark = iceberg_spark
    cat, t = _make(spark, tmp_path, 2)
    table = open_table(cat.settings(), "db.t")
    project = _project(tmp_path, cat)
    before: list[tuple[Any, ...]] = []
    rng = random.Random(int(os.environ.get("COMPACTOR_ICEBERG_KILL_SEED", "39")))
    killed = 0
    for k in range(KILLS):
        lo = 10_000 + k * 30  # more small files in every partition: each round has bins to rewrite
        for _ in range(2):
            spark.sql(f"INSERT INTO {t} " + ROWS.format(lo=lo, hi=lo + 30))
            lo += 1_000_000
        before = _rows(spark, t)
        r = project.cli("plan", "--detailed-exitcode")
        assert r.exit_code == 2, r.output
        proc = subprocess.Popen([sys.executable, "-m", "compactor", "apply", str(project.plan_file),
                                 "--project-dir", str(project.root)], stdout=subprocess.DEVNULL,
                                stderr=subprocess.DEVNULL, start_new_session=True)
        time.sleep(rng.uniform(3.0, 30.0))  # the JVM start takes most of the first 15 s here
        if proc.poll() is None:  # the process and its JVM, as a container's end kills them
            os.killpg(proc.pid, signal.SIGKILL)
            killed += 1
        proc.wait()
        assert _rows(spark, t) == before, f"kill {k}"
    print(f"{killed} of {KILLS} applies killed before they ended")
    _converge(project)
    assert _rows(spark, t) == before
    assert _unreferenced_outputs(table) == []
