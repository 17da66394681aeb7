"""A schema change between two commit groups of one apply (finding 2 of issue 18)."""

from __future__ import annotations

import json
from pathlib import Path

import pyarrow.parquet as pq
from deltalake import DeltaTable

from compactor.formats.delta.read.log import read_commit
from compactor.models.table import TableLocation
from compactor.project.model import Target
from compactor.runtime import faults
from compactor.tasks.apply import apply_plan
from tests.apply.helpers import make_table, plan_for


def _rename_id_to_user_id(t: Path) -> None:
    """The two commits delta-spark writes for ALTER TABLE SET TBLPROPERTIES ('delta.columnMapping.mode' =
    'name') then ALTER TABLE RENAME COLUMN id TO user_id: a protocol upgrade with the mapping metadata
    (physical names = the old names), then a metaData action with the logical name changed."""
    v = DeltaTable(str(t)).version()
    meta = next(json.loads(line)["metaData"] for line in (t / "_delta_log" / f"{0:020d}.json").read_text().splitlines()
                if "metaData" in line)
    schema = json.loads(meta["schemaString"])
    for i, f in enumerate(schema["fields"], start=1):
        f["metadata"] = {"delta.columnMapping.id": i, "delta.columnMapping.physicalName": f["name"]}
    meta["configuration"] = {**meta.get("configuration", {}), "delta.columnMapping.mode": "name",
                             "delta.columnMapping.maxColumnId": str(len(schema["fields"]))}
    meta["schemaString"] = json.dumps(schema)
    proto = {"minReaderVersion": 2, "minWriterVersion": 5}
    info = {"timestamp": 1, "operation": "SET TBLPROPERTIES", "operationParameters": {}}
    (t / "_delta_log" / f"{v + 1:020d}.json").write_text(
        "\n".join(json.dumps(x) for x in ({"commitInfo": info}, {"protocol": proto}, {"metaData": meta})) + "\n")
    for f in schema["fields"]:
        if f["name"] == "id":
            f["name"] = "user_id"
    meta["schemaString"] = json.dumps(schema)
    info = {"timestamp": 2, "operation": "RENAME COLUMN", "operationParameters": {}}
    (t / "_delta_log" / f"{v + 2:020d}.json").write_text(
        "\n".join(json.dumps(x) for x in ({"commitInfo": info}, {"metaData": meta})) + "\n")


def test_finding_2_schema_change_between_groups_makes_the_later_groups_stale(tmp_path: Path) -> None:
    """Column mapping enabled and id renamed right after compactor's first commit group: the later groups
    took the schema from the refreshed handle, did not find `user_id` in their inputs (physically `id`)
    and filled it with nulls, verified by row count only. Now every group re-checks the log for metaData
    and protocol actions before its rewrite and before its commit: the later groups are stale."""
    t = tmp_path / "t"
    make_table(t, partitions=3, appends=3, rows=5)
    plan = plan_for(t)
    assert len(plan.tables[0].actions) == 3
    done: list[int] = []

    def rename_after_first_group(point: str) -> None:
        if point == "delta.after_commit" and not done:
            done.append(1)
            _rename_id_to_user_id(t)

    previous = faults.set_hook(rename_after_first_group)
    try:
        run = apply_plan(plan, target=Target(commit_every_bins=1), watch_s=0)
    finally:
        faults.set_hook(previous)
    assert done
    statuses = [r.status for r in run.results]
    assert statuses[0] == "success" and statuses[1:] == ["stale", "stale"], [(r.status, r.error) for r in run.results]
    assert "changed the table's schema" in (run.results[1].error or "")
    # every live file holds the column under its physical name `id`, never null (read file by file:
    # what any column-mapping reader resolves `user_id` to)
    values = []
    for uri in DeltaTable(str(t)).file_uris():
        table = pq.read_table(uri)
        assert "id" in table.column_names and table.column("id").null_count == 0, (uri, table.schema)
        values += table.column("id").to_pylist()
    assert sorted(values) == list(range(45))
    last = DeltaTable(str(t)).version()
    assert read_commit(TableLocation(str(t)), last).operation == "RENAME COLUMN"  # nothing committed after the rename
