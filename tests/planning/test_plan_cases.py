"""Planner behaviour as YAML case files (tests/cases/plan/*.yml), run by one harness.

Case format:
  description: what the case shows
  now: ISO timestamp (default 2024-01-10T00:00:00+00:00)
  engine: local | spark          (local -> delta-rs bin model, spark -> delta-spark model)
  partition_columns: [date]
  version: 7                      (table version; default 1)
  properties: {k: v}              (table properties)
  files:                          (explicit files, in log order; deleted: rows its deletion vector deletes)
    - {path: a, size: 1000, date: "2024-01-01", records: 10, age: 3600, deleted: 2}
  extra: {k: v}                   (TableState.extra as DeltaFacts fields, e.g. deletion_vectors_enabled / has_deletion_vectors)
  generate:                       (or generated files, appended after `files`, in order)
    - {count: 10, size: 1000, records: 10, age: 86400, partition: {date: "2024-01-01"}}
  policy: {...}                   (a table entry as in a policy file, without name/path)
  expect:
    actions: [{type, partition, input_files, expected_output_files, input_bytes?, rows?, bins?}]  exact list
    skipped: [{reason, partition?}]       exact multiset (omit to not check)
    error: substring of the table error
    files_after: N
Sizes in `files`/`generate` accept 512KB-style strings; `age` is seconds before `now`.
"""

from __future__ import annotations

import datetime as dt
from pathlib import Path

import pyarrow as pa
import pytest
import yaml

from compactor.formats.delta.read.facts import DeltaFacts, DeltaProtocol
from compactor.models.state import TableState, files_table
from compactor.planning.plan import digest_paths
from compactor.policy.build import build_table
from compactor.policy.yamlpos import load_yaml
from compactor.project.model import Target
from compactor.tasks.plan import build_plan
from compactor.units import parse_size

CASES = sorted((Path(__file__).parents[1] / "cases" / "plan").glob("*.yml"))


def _policy(entry: dict):
    table = {"name": "t", "path": "/lake/t", **entry}
    text = yaml.safe_dump({"version": 1, "tables": [table]}, sort_keys=False)
    doc, _ = load_yaml(text)
    policy, diags = build_table(table, doc=doc, file="case.yml", base="tables[0]")
    errors = [d for d in diags if d.severity == "error"]
    assert not errors, errors
    return policy


def _files(case: dict, now: dt.datetime) -> list[dict]:
    rows = []
    now_ms = int(now.timestamp() * 1000)
    pcols = case.get("partition_columns", [])
    for f in case.get("files", []):
        rows.append({"path": f["path"], "size_bytes": parse_size(f["size"]),
                     "modification_time": now_ms - int(f.get("age", 86400)) * 1000,
                     "num_records": f.get("records", 1), "partition": {c: f.get(c) for c in pcols}})
    n = 0
    for g in case.get("generate", []):
        for _ in range(g["count"]):
            part = g.get("partition", {})
            name = "/".join(f"{k}={v}" for k, v in part.items())
            rows.append({"path": f"{name}/g{n:05d}.parquet".lstrip("/"), "size_bytes": parse_size(g["size"]),
                         "modification_time": now_ms - int(g.get("age", 86400)) * 1000,
                         "num_records": g.get("records", 1), "partition": part})
            n += 1
    return rows


@pytest.mark.parametrize("path", CASES, ids=[p.stem for p in CASES])
def test_plan_case(path: Path) -> None:
    case = yaml.safe_load(path.read_text())
    now = dt.datetime.fromisoformat(case.get("now", "2024-01-10T00:00:00+00:00"))
    pcols = tuple(case.get("partition_columns", []))
    files = files_table(_files(case, now), pcols)
    extra = dict(case.get("extra", {}))
    deleted = {f["path"]: f["deleted"] for f in case.get("files", []) if f.get("deleted")}
    if deleted:
        files = files.append_column("deleted_rows", pa.array([deleted.get(p, 0) for p in files.column("path").to_pylist()],
                                                             pa.int64()))
        extra.update(deleted_rows=deleted, has_deletion_vectors=True, deletion_vectors_enabled=True)
    state = TableState(uri="/lake/t", format="delta", version=case.get("version", 1), partition_columns=pcols,
                       files=files, properties=case.get("properties", {}),
                       extra=DeltaFacts(protocol=DeltaProtocol(**case.get("protocol", {})), **extra))
    target = Target(engine=case.get("engine", "local"))
    plan = build_plan([_policy(case.get("policy", {}))], {"t": state}, now=now, target=target, project_name="cases")
    table = plan.tables[0]
    exp = case["expect"]
    if "error" in exp:
        assert table.error and exp["error"] in table.error, table.error
        return
    assert table.error is None, table.error
    got_actions = []
    for a in table.actions:
        got = {"type": a.type, "partition": dict(a.partition), "input_files": a.input_files,
               "expected_output_files": a.expected_output_files}
        want = next((w for w in exp.get("actions", []) if w["type"] == a.type and w.get("partition", {}) == dict(a.partition)), {})
        for extra in ("input_bytes", "rows"):
            if extra in want:
                got[extra] = getattr(a, extra)
        if "bins" in want:
            got["bins"] = [list(b) for b in a.bins]
        if "params" in want:
            got["params"] = {k: a.params().get(k) for k in want["params"]}
        got_actions.append(got)
    want_actions = [{**w, "partition": w.get("partition", {})} for w in exp.get("actions", [])]
    assert got_actions == want_actions
    if "skipped" in exp:
        got_sk = sorted((s.reason, yaml.safe_dump(dict(s.partition)) if s.partition else "") for s in table.skipped)
        want_sk = sorted((s["reason"], yaml.safe_dump(s["partition"]) if s.get("partition") else "") for s in exp["skipped"])
        assert got_sk == want_sk
    if "files_after" in exp:
        assert table.files_after == exp["files_after"]
    # every action's precondition lists exactly its input files, and bins cover them
    for a in table.actions:
        if a.type in ("compact", "z_order", "sort"):
            assert len(a.input_paths) == len(set(a.input_paths)) == a.input_files
            assert a.precondition.digest == digest_paths(a.input_paths)
