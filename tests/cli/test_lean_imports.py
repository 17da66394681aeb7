"""What a plan or an apply loads, measured where it costs: a command whose target runs no Spark loads
pyarrow without numpy (45-60 ms of every plan and apply; compactor/runtime/pyarrow_numpy.py), one that
may run Spark loads it as always, and a local apply of a table with string partition values never loads
pyarrow.compute (30-50 ms of import for nothing it needs: formats/delta/read/state.py)."""

from __future__ import annotations

import importlib.util
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from compactor.models.catalog import CatalogSettings
from compactor.project.model import Target
from tests.apply.helpers import exactly_once
from tests.cli.test_cli import lake_project

pytestmark = pytest.mark.skipif(importlib.util.find_spec("numpy") is None,
                                reason="numpy is not installed here: pyarrow has nothing to import, nothing is deferred")


def _loaded(stderr: str) -> set[str]:
    """Modules a ``python -X importtime`` run really loaded (a refused import is listed too, with no
    submodules: numpy._core is what a real import of numpy brings)."""
    return {line.rsplit("|", 1)[-1].strip() for line in stderr.splitlines() if line.startswith("import time:")}


def _run(args: list[str], **env: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-X", "importtime", "-m", "compactor", *args], capture_output=True,
                          text=True, env={**os.environ, "COMPACTOR_WATCH_WINDOW": "0", **env})


def test_local_plan_and_apply_never_load_numpy_and_compact_exactly(tmp_path: Path) -> None:
    from deltalake import DeltaTable

    table, proj, rows = lake_project(tmp_path)
    before = len(DeltaTable(str(table)).file_uris())
    plan = tmp_path / "plan.json"
    for args in (["plan", "--project-dir", str(proj), "--out", str(plan)],
                 ["apply", str(plan), "--project-dir", str(proj)]):
        r = _run(args)
        assert r.returncode == 0, r.stdout + r.stderr[-3000:]
        loaded = _loaded(r.stderr)
        assert "pyarrow.lib" in loaded and "numpy._core" not in loaded, sorted(m for m in loaded if "numpy" in m)
        if args[0] == "apply":  # it reads its state and rewrites without pyarrow.compute (the planner uses it)
            assert "pyarrow.compute" not in loaded
    exactly_once(table, rows)
    assert len(DeltaTable(str(table)).file_uris()) < before
    assert json.loads(plan.read_text())["tables"][0]["actions"]


def test_the_import_check_sees_pyarrow_compute_when_a_cast_loads_it() -> None:
    """The apply's check above can fail: one cast in a process loads pyarrow.compute, and the check sees it."""
    r = subprocess.run([sys.executable, "-X", "importtime", "-c",
                        "import pyarrow as pa; pa.array([1], pa.int32()).cast(pa.int64())"],
                       capture_output=True, text=True)
    assert r.returncode == 0, r.stderr[-2000:]
    assert "pyarrow.compute" in _loaded(r.stderr)


def test_the_check_can_fail_numpy_loads_when_lean_imports_are_off(tmp_path: Path) -> None:
    """The same plan with COMPACTOR_LEAN_IMPORTS=0 (the escape hatch) loads numpy with pyarrow, and pandas
    too where it is installed (pyarrow imports it on its first conversion of Python values)."""
    _, proj, _ = lake_project(tmp_path)
    r = _run(["plan", "--project-dir", str(proj), "--out", str(tmp_path / "plan.json")], COMPACTOR_LEAN_IMPORTS="0")
    assert r.returncode == 0, r.stdout + r.stderr[-3000:]
    loaded = _loaded(r.stderr)
    assert "numpy._core" in loaded
    assert ("pandas.core" in loaded) == (importlib.util.find_spec("pandas") is not None)


def test_a_plan_for_the_spark_engine_loads_numpy(tmp_path: Path) -> None:
    """A target that may run Spark keeps pyarrow's numpy support (planning a path table starts no JVM)."""
    _, proj, _ = lake_project(tmp_path)
    (proj / "profiles.yml").write_text("p:\n  target: dev\n  outputs:\n    dev: {engine: spark, spark: {master: 'local[1]'}}\n")
    r = _run(["plan", "--project-dir", str(proj), "--out", str(tmp_path / "plan.json")])
    assert r.returncode == 0, r.stdout + r.stderr[-3000:]
    assert "numpy._core" in _loaded(r.stderr)
    assert json.loads((tmp_path / "plan.json").read_text())["target"]["engine"] == "spark"


def test_a_target_runs_spark_with_the_spark_engine_or_a_hive_catalog() -> None:
    assert not Target().runs_spark
    assert not Target(catalogs={"g": CatalogSettings("g", "glue", {}), "u": CatalogSettings("u", "unity", {})}).runs_spark
    assert Target(engine="spark").runs_spark
    assert Target(catalogs={"h": CatalogSettings("h", "hive", {})}).runs_spark


SPARK_AFTER_LEAN_PYARROW = """
import sys
from compactor.runtime.pyarrow_numpy import defer_numpy, deferred, REFUSED, SPARK_AFTER_LEAN_PYARROW
defer_numpy()
assert deferred()
try:
    import numpy
except ImportError as e:
    assert str(e) == REFUSED, e
else:
    raise AssertionError("numpy imported while deferred")
import pyarrow as pa
assert pa.array([1, None]).to_pylist() == [1, None] and "numpy._core" not in sys.modules
try:
    import pyspark
except ImportError as e:
    assert str(e) == SPARK_AFTER_LEAN_PYARROW, e
    print("refused")
"""


def test_pyspark_after_a_lean_pyarrow_fails_at_once_and_says_why() -> None:
    """A Spark path the predicate missed would meet a pyarrow that cannot convert to numpy: its import of
    pyspark fails there and then, naming the defect, instead of a conversion failing later."""
    r = subprocess.run([sys.executable, "-c", SPARK_AFTER_LEAN_PYARROW], capture_output=True, text=True)
    assert r.returncode == 0 and r.stdout.strip() == "refused", r.stdout + r.stderr[-2000:]


SPARK_BEFORE_PYARROW = """
import sys
from compactor.runtime.pyarrow_numpy import defer_numpy, deferred
defer_numpy()
import pyspark  # before pyarrow: the refusal is lifted
assert not deferred()
import numpy as np
import pyarrow as pa
assert pa.array(np.array([1, 2])).to_numpy().tolist() == [1, 2]
print("ok")
"""


def test_pyspark_before_pyarrow_lifts_the_refusal_and_pyarrow_converts_numpy() -> None:
    pytest.importorskip("pyspark", reason="pyspark is not installed (the [spark] extra)")
    r = subprocess.run([sys.executable, "-c", SPARK_BEFORE_PYARROW], capture_output=True, text=True)
    assert r.returncode == 0 and r.stdout.strip() == "ok", r.stdout + r.stderr[-2000:]


def test_nothing_is_deferred_where_pyarrow_is_loaded_already() -> None:
    """This test process has pyarrow (with numpy): deferring would change nothing, so it does nothing."""
    import pyarrow  # noqa: F401

    from compactor.runtime.pyarrow_numpy import defer_numpy, deferred

    defer_numpy()
    assert not deferred()
