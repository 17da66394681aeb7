"""Statistics compactor writes are exactly what delta-spark writes (finding 7 of issue 18)."""

from __future__ import annotations

import decimal
import json
from pathlib import Path

from deltalake import DeltaTable

from compactor.formats.delta.read.log import read_commit
from compactor.models.table import TableLocation
from compactor.project.model import Target
from compactor.tasks.apply import apply_plan
from tests.apply.helpers import plan_for

D = decimal.Decimal
MAX = D("1.000000000000000001")


def _stats(t: Path, version: int) -> list[dict]:
    c = read_commit(TableLocation(str(t)), version)
    return [json.loads(a["stats"], parse_float=D) for a in c.adds.values()]


def test_finding_7_decimal_stats_exact(tmp_path: Path, delta_spark) -> None:
    """delta-spark writes a decimal(38,18) max of 1.000000000000000001 exactly; compactor wrote
    float(Decimal) = 1.0, below the real max, and a filtered read skipped the file holding the row."""
    t = tmp_path / "t"
    delta_spark.sql(f"CREATE TABLE delta.`{t}` (id BIGINT, d DECIMAL(38,18)) USING delta")
    for i, v in enumerate(["0.5", str(MAX), "-0.0000001", "0.25"]):
        delta_spark.sql(f"INSERT INTO delta.`{t}` VALUES ({i}, CAST('{v}' AS DECIMAL(38,18)))")
    written = [s for v in range(1, 5) for s in _stats(t, v)]
    assert {s["maxValues"]["d"] for s in written} >= {MAX}  # delta-spark's own stats are exact
    query = f"SELECT count(*) FROM delta.`{t}` WHERE d = CAST('{MAX}' AS DECIMAL(38,18))"
    assert delta_spark.sql(query).first()[0] == 1

    run = apply_plan(plan_for(t), target=Target(), watch_s=0)
    assert run.ok, [(r.status, r.error) for r in run.results]
    dt = DeltaTable(str(t))
    (after,) = _stats(t, dt.version())
    assert after["maxValues"]["d"] == MAX and after["minValues"]["d"] == D("-0.0000001")
    assert delta_spark.sql(query).first()[0] == 1  # data skipping with compactor's stats keeps the file
