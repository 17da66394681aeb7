"""Plan files: round trip, a stable digest, and clear errors for bad files."""

from __future__ import annotations

import datetime as dt
import hashlib
import json
from dataclasses import replace
from pathlib import Path

import pytest

from compactor.errors import PlanError
from compactor.models.state import TableState, files_table
from compactor.planning.plan import digest_paths, dumps_action, dumps_compact, plan_digest, plan_to_dict
from compactor.policy.model import Compaction, TablePolicy
from compactor.project.model import Target
from compactor.tasks.plan import build_plan
from compactor.tasks.plan_file import load_plan, write_plan


def _plan():
    rows = [{"path": f"d={d}/f{i}-\"quoted\"-é.parquet", "size_bytes": 1000 + i, "modification_time": 0,
             "num_records": 10, "partition.d": str(d)} for d in range(3) for i in range(6)]
    state = TableState(uri="/t", format="delta", version=7, partition_columns=("d",),
                       files=files_table(rows, ["d"]))
    policy = TablePolicy(name="t", path="/t", compaction=Compaction(target_file_size=10_000))
    return build_plan([policy], {"t": state}, now=dt.datetime(2025, 1, 1, tzinfo=dt.UTC),
                      target=Target(), project_name="p")


def test_digest_is_sha256_of_newline_terminated_paths() -> None:
    paths = ["a/b.parquet", "c=é/d.parquet"]
    assert digest_paths(paths) == "sha256:" + hashlib.sha256(b"a/b.parquet\nc=\xc3\xa9/d.parquet\n").hexdigest()
    assert digest_paths([]) == "sha256:" + hashlib.sha256(b"").hexdigest()
    assert digest_paths(["a", "b"]) != digest_paths(["b", "a"])


def test_write_then_load_is_the_same_plan(tmp_path: Path) -> None:
    plan = _plan()
    assert len(plan.tables[0].actions) == 3
    out = write_plan(plan, tmp_path / "sub" / "plan.json")
    written = json.loads(out.read_text())
    assert written.pop("digest").startswith("sha256:")
    assert written == json.loads(json.dumps(plan_to_dict(plan)))
    loaded = load_plan(out)
    assert loaded.digest and replace(loaded, digest="") == plan
    assert not list((tmp_path / "sub").glob(".*.tmp"))  # written via a temp file, then renamed


def test_bad_plan_files_raise_plan_errors(tmp_path: Path) -> None:
    with pytest.raises(PlanError, match="not found"):
        load_plan(tmp_path / "missing.json")
    bad = tmp_path / "bad.json"
    bad.write_text("{not json")
    with pytest.raises(PlanError, match="not valid JSON"):
        load_plan(bad)
    data = plan_to_dict(_plan())
    bad.write_text(json.dumps({**data, "schema_version": 999}))
    with pytest.raises(PlanError, match="schema_version"):
        load_plan(bad)
    data["tables"][0]["actions"][0]["input_files"] = "many"
    bad.write_text(json.dumps(data))
    with pytest.raises(PlanError, match="has no digest"):
        load_plan(bad)
    bad.write_text(json.dumps({**data, "digest": plan_digest(data)}))
    with pytest.raises(PlanError, match="plan.schema.json at tables/0/actions/0/input_files"):
        load_plan(bad)


def test_own_plans_skip_the_schema_and_edited_ones_do_not(tmp_path: Path) -> None:
    """A plan this compactor wrote loads without importing jsonschema (a memo of its digest); the same
    plan edited and re-signed is validated against plan.schema.json again."""
    import subprocess
    import sys

    from compactor.planning.plan import plan_digest

    out = write_plan(_plan(), tmp_path / "plan.json")
    probe = ("import sys\nfrom compactor.tasks.plan_file import load_plan\nload_plan(sys.argv[1])\n"
             "print('jsonschema' in sys.modules)")
    r = subprocess.run([sys.executable, "-c", probe, str(out)], capture_output=True, text=True, check=True)
    assert r.stdout.strip() == "False"
    doc = json.loads(out.read_text())
    doc["tables"][0]["actions"][0]["input_bytes"] = -1
    doc.pop("digest")
    doc["digest"] = plan_digest(doc)
    edited = tmp_path / "edited.json"
    edited.write_text(json.dumps(doc))
    with pytest.raises(PlanError, match="plan.schema.json"):
        load_plan(edited)


def test_skip_reasons_are_one_list_in_code_schema_and_readme(tmp_path: Path) -> None:
    """The shared SkipReason and each format's registered reasons are the one list: the plan schema's enum
    and README's list of reason codes match it, and a plan file with a reason compactor does not know is
    refused at load (not a ValueError later)."""
    import re

    from compactor.planning.plan import SkipReason
    from compactor.planning.vocabulary import skip_reasons
    from compactor.policy.schema import load_schema

    known = skip_reasons()
    assert known[:len(SkipReason)] == [r.value for r in SkipReason] and len(set(known)) == len(known)
    assert {"retention_in_sync", "nothing_to_vacuum", "writer_active", "downstream_readers"} <= set(known)
    schema = load_schema("plan.schema.json")["$defs"]["skip"]["properties"]["reason"]["enum"]
    assert schema == known
    readme = (Path(__file__).resolve().parents[2] / "README.md").read_text(encoding="utf-8")
    start = readme.index("Every partition left alone carries a reason code")
    listed = readme[start:readme.index("These come with the numbers", start)]
    assert set(re.findall(r"`(\w+)`", listed)) == set(known)
    plan = _plan()
    assert all(isinstance(s.reason, SkipReason) for t in plan.tables for s in t.skipped)
    data = plan_to_dict(plan)
    data["tables"][0]["skipped"] = [{"reason": "felt_like_it", "message": ""}]
    bad = tmp_path / "bad.json"
    bad.write_text(json.dumps({**data, "digest": plan_digest(data)}))
    with pytest.raises(PlanError, match="plan.schema.json at tables/0/skipped/0/reason"):
        load_plan(bad)


@pytest.mark.parametrize("path", [
    "d=1/plain.parquet", 'd=1/"quoted"\\back.parquet', "d=é/x.parquet", "d=1/del\x7f.parquet",
    "d=1/ctl\x01\x1f\n\t.parquet", "d=1/\u2028.parquet", "d=1/😀.parquet", "d=1/</script>.parquet"])
def test_an_action_is_written_exactly_as_json_writes_it(path: str) -> None:
    """The action pieces (orjson) are the text the digest of older plans was computed on (json.dumps)."""
    plan = _plan()
    action = plan_to_dict(plan)["tables"][0]["actions"][0]
    action["bins"] = [[path, "d=1/other.parquet"]]
    action["partition"] = {"d": path}
    assert dumps_action(action) == dumps_compact(action) == json.dumps(action, separators=(",", ":"))
    for value in (2**64, -(2**63) - 1, 2**63 - 1):  # beyond orjson's 64 bits: json writes them
        assert dumps_action({**action, "rows": value}) == json.dumps({**action, "rows": value}, separators=(",", ":"))


def test_a_plan_written_with_json_alone_loads_with_its_digest(tmp_path: Path) -> None:
    """A plan an earlier compactor wrote (every piece through json.dumps) is not taken for an edited one."""
    data = plan_to_dict(_plan())
    h = hashlib.sha256()
    for t in data["tables"]:
        for a in t["actions"]:
            h.update(json.dumps(a, separators=(",", ":")).encode())
        h.update(json.dumps({k: v for k, v in t.items() if k != "actions"}, separators=(",", ":")).encode())
    h.update(json.dumps({k: v for k, v in data.items() if k != "tables"}, separators=(",", ":")).encode())
    data["digest"] = "sha256:" + h.hexdigest()
    assert plan_digest(data) == data["digest"]
    (tmp_path / "plan.json").write_text(json.dumps(data))
    assert load_plan(tmp_path / "plan.json").digest == data["digest"]
    data["tables"][0]["actions"][0]["input_bytes"] += 0.0  # an edit that json and orjson write differently
    assert plan_digest(data) != data["digest"]
