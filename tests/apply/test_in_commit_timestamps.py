"""In-commit timestamps on a table compactor commits to itself (formats/delta/apply/log_writer.py): the commitInfo
comes first with an ``inCommitTimestamp`` one past the previous commit's where that is later than now; where
delta-rs would commit instead (a locking store) the table is refused, nothing committed. The delta-spark kind is
tests/interop/test_kinds_matrix.py (``in_commit_timestamps``)."""

from __future__ import annotations

import json
import time
from pathlib import Path

from compactor.formats.delta.apply import log_writer
from compactor.project.model import Target
from compactor.tasks.apply import apply_plan
from tests.apply.helpers import exactly_once, make_table, plan_for

#: a previous commit's in-commit timestamp an hour ahead of this machine's clock: the next must be one past it
AHEAD_MS = 3_600_000


def _enable_in_commit_timestamps(t: Path) -> int:
    """A commit (as a writer that supports the feature writes it) adding inCommitTimestamp to the protocol and
    enabling it, stamped an hour ahead; returns that stamp."""
    log = t / "_delta_log"
    version = max(int(f.name[:20]) for f in log.glob("*.json"))
    meta = next(json.loads(line)["metaData"] for line in (log / f"{0:020d}.json").read_text().splitlines()
                if '"metaData"' in line)
    meta["configuration"] = {**meta.get("configuration", {}), "delta.enableInCommitTimestamps": "true",
                             "delta.inCommitTimestampEnablementVersion": str(version + 1)}
    stamp = int(time.time() * 1000) + AHEAD_MS
    meta["configuration"]["delta.inCommitTimestampEnablementTimestamp"] = str(stamp)
    actions = [{"commitInfo": {"inCommitTimestamp": stamp, "timestamp": stamp, "operation": "SET TBLPROPERTIES"}},
               {"protocol": {"minReaderVersion": 1, "minWriterVersion": 7,
                             "writerFeatures": ["appendOnly", "invariants", "inCommitTimestamp"]}},
               {"metaData": meta}]
    (log / f"{version + 1:020d}.json").write_text("\n".join(json.dumps(a) for a in actions) + "\n")
    return stamp


def _first_actions(t: Path, after: int) -> list[dict]:
    log = t / "_delta_log"
    return [json.loads((log / f.name).read_text().splitlines()[0]) for f in sorted(log.glob("*.json"))
            if int(f.name[:20]) > after]


def test_compactors_commit_stamps_one_past_the_previous_commit(tmp_path: Path) -> None:
    t = tmp_path / "t"
    n = make_table(t, partitions=2, appends=4)
    stamp = _enable_in_commit_timestamps(t)
    plan = plan_for(t)
    assert plan.tables[0].actions, plan.tables[0].skipped
    run = apply_plan(plan, target=Target())
    assert all(r.status == "success" for r in run.results), [r.error for r in run.results]
    exactly_once(t, n)
    firsts = _first_actions(t, int(plan.tables[0].version or 0))
    stamps = [a["commitInfo"]["inCommitTimestamp"] for a in firsts]
    assert stamps and stamps == list(range(stamp + 1, stamp + 1 + len(stamps)))  # one commit per group
    assert all(a["commitInfo"]["timestamp"] == a["commitInfo"]["inCommitTimestamp"] for a in firsts)


def test_where_delta_rs_commits_the_table_is_refused_and_nothing_committed(tmp_path: Path, monkeypatch) -> None:
    t = tmp_path / "t"
    n = make_table(t, partitions=2, appends=4)
    _enable_in_commit_timestamps(t)
    plan = plan_for(t)
    before = sorted(p.name for p in (t / "_delta_log").glob("*.json"))
    monkeypatch.setattr(log_writer, "writes_directly", lambda dt, where: False)  # as behind a locking provider
    run = apply_plan(plan, target=Target())
    assert run.results and all(r.status != "success" for r in run.results)
    assert all("inCommitTimestamp cannot be written by delta-rs" in (r.error or "") for r in run.results), \
        [r.error for r in run.results]
    assert sorted(p.name for p in (t / "_delta_log").glob("*.json")) == before
    exactly_once(t, n)
