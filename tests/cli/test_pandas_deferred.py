"""A compactor command that runs no Spark never loads pandas (pyarrow would import it on its first
conversion of Python values: 0.2-0.27 s), and once pyspark is imported, pyarrow works with pandas as if
nothing had been deferred (compactor/runtime/pyarrow_pandas.py)."""

from __future__ import annotations

import importlib.util
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from tests.cli.test_cli import lake_project

pytestmark = pytest.mark.skipif(importlib.util.find_spec("pandas") is None,
                                reason="pandas is not installed here: pyarrow has nothing to import, nothing is deferred")


def _loaded(stderr: str) -> set[str]:
    """Modules a ``python -X importtime`` run really loaded (a refused import is listed too, with no
    submodules: pandas.core is what a real import of pandas brings)."""
    return {line.rsplit("|", 1)[-1].strip() for line in stderr.splitlines() if line.startswith("import time:")}


def test_plan_and_apply_never_load_pandas(tmp_path: Path) -> None:
    table, proj, rows = lake_project(tmp_path)
    env = {**os.environ, "COMPACTOR_WATCH_WINDOW": "0"}
    plan = tmp_path / "plan.json"
    for args in (["plan", "--project-dir", str(proj), "--out", str(plan)],
                 ["apply", str(plan), "--project-dir", str(proj)]):
        r = subprocess.run([sys.executable, "-X", "importtime", "-m", "compactor", *args], capture_output=True,
                           text=True, env=env)
        assert r.returncode == 0, r.stdout + r.stderr[-3000:]
        loaded = _loaded(r.stderr)
        assert "pyarrow" in loaded and "pandas.core" not in loaded, sorted(m for m in loaded if "pandas" in m)
    from deltalake import DeltaTable

    assert DeltaTable(str(table)).to_pyarrow_table().num_rows == rows
    assert json.loads(plan.read_text())["tables"]


def test_without_the_deferral_pyarrow_does_load_pandas() -> None:
    """The check above can fail: the same conversion loads pandas in a plain process."""
    code = "import sys, pyarrow as pa; pa.array([1, 2]); print('pandas.core' in sys.modules)"
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert r.stdout.strip() == "True"


PANDAS_AFTER_SPARK = """
import sys
from compactor.runtime.pyarrow_pandas import defer_pandas, REFUSED
defer_pandas()
import pyarrow as pa
pa.table({"a": [1.5, None]}).column("a").to_pylist()
assert "pandas.core" not in sys.modules
try:
    import pandas
except ImportError as e:
    assert str(e) == REFUSED, e
else:
    raise AssertionError("pandas imported before pyspark")
import pyspark  # lifts the refusal and turns pyarrow's pandas support on
import numpy as np
import pandas as pd
ts = pd.Series(pd.to_datetime(["2024-01-01", None]))
assert pa.array(ts).type == pa.timestamp("ns") and pa.array(ts).null_count == 1
assert pa.array(pd.Series([1.0, np.nan]), from_pandas=True).null_count == 1
assert pa.Table.from_pandas(pd.DataFrame({"x": [1, 2]})).num_rows == 2
assert pa.table({"a": [1, 2]}).to_pandas()["a"].tolist() == [1, 2]
print("ok")
"""


def test_pyspark_gets_pandas_and_pyarrow_converts_it() -> None:
    pytest.importorskip("pyspark", reason="pyspark is not installed (the [spark] extra)")
    r = subprocess.run([sys.executable, "-c", PANDAS_AFTER_SPARK], capture_output=True, text=True)
    assert r.returncode == 0 and r.stdout.strip() == "ok", r.stderr[-2000:]
