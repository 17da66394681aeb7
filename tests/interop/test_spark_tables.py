"""Each Spark-written table kind of tests/spark_tables.py has the property it is built for, read
straight from its _delta_log (no delta-rs in between)."""

from __future__ import annotations

import json
import re
from collections import Counter
from pathlib import Path
from typing import Any

import pytest

from tests import spark_tables as st

pytestmark = [pytest.mark.spark, pytest.mark.delta_jars]


def _all_actions(path: str, kind: str) -> list[dict[str, Any]]:
    return [a[kind] for v in st.commit_versions(path) for a in st.commit_actions(path, v) if kind in a]


def _protocol(path: str) -> dict[str, Any]:
    return _all_actions(path, "protocol")[-1]


def _metadata(path: str) -> dict[str, Any]:
    return _all_actions(path, "metaData")[-1]


def _spark_rows(spark: Any, path: str) -> int:
    return spark.read.format("delta").load(path).count()


def test_date_partitioned_has_many_small_files_per_day(delta_spark, tmp_path: Path) -> None:
    t = st.date_partitioned(delta_spark, tmp_path / "t")
    adds = st.live_adds(t.path)
    assert _metadata(t.path)["partitionColumns"] == ["date"]
    per_day = Counter(a["partitionValues"]["date"] for a in adds)
    # 4 appends x 5 write tasks, every task holds rows of every day
    assert per_day == {"2024-01-01": 20, "2024-01-02": 20, "2024-01-03": 20}
    assert all(a["size"] < 4096 for a in adds)
    assert sum(json.loads(a["stats"])["numRecords"] for a in adds) == t.rows == _spark_rows(delta_spark, t.path)


def test_int_partitioned_stores_ints_as_strings(delta_spark, tmp_path: Path) -> None:
    t = st.int_partitioned(delta_spark, tmp_path / "t")
    schema = json.loads(_metadata(t.path)["schemaString"])
    assert {f["name"]: f["type"] for f in schema["fields"]}["bucket"] == "integer"
    assert {a["partitionValues"]["bucket"] for a in st.live_adds(t.path)} == {"0", "1", "2", "3"}
    assert _spark_rows(delta_spark, t.path) == t.rows


def test_mixed_partition_types(delta_spark, tmp_path: Path) -> None:
    t = st.mixed_partitioned(delta_spark, tmp_path / "t")
    schema = {f["name"]: f["type"] for f in json.loads(_metadata(t.path)["schemaString"])["fields"]}
    assert [schema[c] for c in st.MIXED_PARTITIONS] == ["integer", "date", "timestamp", "boolean", "decimal(10,2)"]
    values = {c: {a["partitionValues"][c] for a in st.live_adds(t.path)} for c in st.MIXED_PARTITIONS}
    assert values == {
        "region_id": {"0", "1"},
        "day": {"2024-03-01", "2024-03-02"},
        # delta-spark 4.4 writes timestamp partition values as UTC ISO-8601 with microseconds
        "ts": {"2024-03-01T10:30:00.000000Z", "2024-03-01T11:30:00.000000Z"},
        "flag": {"true", "false"},
        "price": {"12.50", "13.50"},
    }
    # ...while the directory name keeps Hive's escaped "yyyy-MM-dd HH:mm:ss" form
    assert any("ts=2024-03-01 10%3A30%3A00" in str(p) for p in Path(t.path).rglob("*.parquet"))
    assert _spark_rows(delta_spark, t.path) == t.rows


def test_deletion_vectors_are_attached_to_files(delta_spark, tmp_path: Path) -> None:
    t = st.deletion_vectors(delta_spark, tmp_path / "t")
    proto = _protocol(t.path)
    assert "deletionVectors" in proto["readerFeatures"] and "deletionVectors" in proto["writerFeatures"]
    adds = st.live_adds(t.path)
    dvs = [a["deletionVector"] for a in adds if a.get("deletionVector")]
    assert len(dvs) == len(adds) == 18  # the DELETE hit every file and rewrote none
    assert all(dv["storageType"] in ("u", "i", "p") and dv["cardinality"] > 0 for dv in dvs)
    assert sum(dv["cardinality"] for dv in dvs) == 60
    # numRecords still counts the physical rows: 600, of which 540 are live
    assert sum(json.loads(a["stats"])["numRecords"] for a in adds) == 600
    assert _spark_rows(delta_spark, t.path) == t.rows == 540


def test_column_mapping_name_mode_with_a_renamed_column(delta_spark, tmp_path: Path) -> None:
    t = st.column_mapping(delta_spark, tmp_path / "t")
    meta = _metadata(t.path)
    assert meta["configuration"]["delta.columnMapping.mode"] == "name"
    proto = _protocol(t.path)
    assert (proto["minReaderVersion"], proto["minWriterVersion"]) == (2, 7)
    assert "columnMapping" in proto["writerFeatures"] and "readerFeatures" not in proto
    fields = {f["name"]: f["metadata"] for f in json.loads(meta["schemaString"])["fields"]}
    assert "amount" not in fields
    physical = fields["total"]["delta.columnMapping.physicalName"]
    assert physical.startswith("col-") and physical != "total"
    date_physical = fields["date"]["delta.columnMapping.physicalName"]
    adds = st.live_adds(t.path)
    # partition values and stats are keyed by physical names; directories are random 2-char prefixes
    assert all(set(a["partitionValues"]) == {date_physical} for a in adds)
    assert all(physical in json.loads(a["stats"])["minValues"] for a in adds)
    assert all(re.fullmatch(r"[A-Za-z0-9]{2}/part-[^/]+\.parquet", a["path"]) for a in adds)
    df = delta_spark.read.format("delta").load(t.path)
    assert "total" in df.columns and df.count() == t.rows
    assert df.where("total IS NULL").count() == 0


def test_clustered_table_has_clustering_domain_metadata(delta_spark, tmp_path: Path) -> None:
    t = st.clustered(delta_spark, tmp_path / "t")
    assert {"clustering", "domainMetadata"} <= set(_protocol(t.path)["writerFeatures"])
    assert _metadata(t.path)["partitionColumns"] == []
    domains = {d["domain"]: json.loads(d["configuration"]) for d in _all_actions(t.path, "domainMetadata")}
    assert domains["delta.clustering"]["clusteringColumns"] == [["kind"], ["id"]]
    assert _spark_rows(delta_spark, t.path) == t.rows


def test_row_tracking_assigns_row_ids(delta_spark, tmp_path: Path) -> None:
    t = st.row_tracking(delta_spark, tmp_path / "t")
    assert {"rowTracking", "domainMetadata"} <= set(_protocol(t.path)["writerFeatures"])
    adds = st.live_adds(t.path)
    assert all("baseRowId" in a and "defaultRowCommitVersion" in a for a in adds)
    base_ids = sorted(a["baseRowId"] for a in adds)
    assert len(set(base_ids)) == len(adds) and base_ids[0] == 0
    marks = [json.loads(d["configuration"])["rowIdHighWaterMark"]
             for d in _all_actions(t.path, "domainMetadata") if d["domain"] == "delta.rowTracking"]
    assert marks[-1] == t.rows - 1
    assert _spark_rows(delta_spark, t.path) == t.rows


def test_v2_checkpoints_with_sidecars(delta_spark, tmp_path: Path) -> None:
    t = st.v2_checkpoint(delta_spark, tmp_path / "t")
    log = Path(t.path) / "_delta_log"
    assert "v2Checkpoint" in _protocol(t.path)["readerFeatures"]
    v2 = sorted(f.name for f in log.iterdir() if re.fullmatch(r"\d{20}\.checkpoint\.[0-9a-f-]{36}\.(json|parquet)", f.name))
    assert [int(n[:20]) for n in v2] == [2, 4]
    assert sorted((log / "_sidecars").glob("*.parquet"))
    last = json.loads((log / "_last_checkpoint").read_text())
    assert last["version"] == 4 and last["v2Checkpoint"]["path"] == v2[-1]
    assert _spark_rows(delta_spark, t.path) == t.rows


def test_multi_part_checkpoints(delta_spark, tmp_path: Path) -> None:
    t = st.multipart_checkpoint(delta_spark, tmp_path / "t")
    log = Path(t.path) / "_delta_log"
    parts = [re.fullmatch(r"(\d{20})\.checkpoint\.(\d{10})\.(\d{10})\.parquet", f.name) for f in log.iterdir()]
    by_version = Counter(int(m.group(1)) for m in parts if m)
    assert set(by_version) == {2, 4} and by_version[4] > 1
    last = json.loads((log / "_last_checkpoint").read_text())
    assert last["version"] == 4 and last["parts"] == by_version[4]
    # the part size was set for the build only; the shared session must not keep it
    assert delta_spark.conf.get("spark.databricks.delta.checkpoint.partSize", None) is None
    assert _spark_rows(delta_spark, t.path) == t.rows


def test_no_indexed_columns_keeps_only_num_records(delta_spark, tmp_path: Path) -> None:
    t = st.no_stats(delta_spark, tmp_path / "t")
    stats = [json.loads(a["stats"]) for a in st.live_adds(t.path)]
    assert stats and all(set(s) == {"numRecords"} for s in stats)
    assert sum(s["numRecords"] for s in stats) == t.rows


def test_stats_collection_off_writes_no_stats(delta_spark, tmp_path: Path) -> None:
    t = st.stats_off(delta_spark, tmp_path / "t")
    adds = st.live_adds(t.path)
    assert adds and not any("stats" in a for a in adds)
    assert delta_spark.conf.get("spark.databricks.delta.stats.collect") == "true"
    assert _spark_rows(delta_spark, t.path) == t.rows


def test_awkward_partition_values(delta_spark, tmp_path: Path) -> None:
    t = st.awkward_partitions(delta_spark, tmp_path / "t")
    adds = st.live_adds(t.path)
    values = {a["partitionValues"]["label"] for a in adds}
    # Spark writes '' as NULL: both land in __HIVE_DEFAULT_PARTITION__ with a JSON null
    assert values == {"a b", "a/b", "a=b", "50%", "ünï©ødé", None}
    by_value = {a["partitionValues"]["label"]: a["path"].split("/")[0] for a in adds}
    # log paths are URI-encoded directory names; the directory names are Hive-escaped
    assert by_value == {"a b": "label=a%20b", "a/b": "label=a%252Fb", "a=b": "label=a%253Db", "50%": "label=50%2525",
                        "ünï©ødé": "label=ünï©ødé", None: "label=__HIVE_DEFAULT_PARTITION__"}
    dirs = {p.name for p in Path(t.path).iterdir() if p.name != "_delta_log"}
    assert dirs == {"label=a b", "label=a%2Fb", "label=a%3Db", "label=50%25", "label=ünï©ødé",
                    "label=__HIVE_DEFAULT_PARTITION__"}
    df = delta_spark.read.format("delta").load(t.path)
    assert df.count() == t.rows
    assert df.where("label = ''").count() == 0 and df.where("label IS NULL").count() == t.rows * 2 // 7


def test_sized_files_writes_one_file_per_entry(delta_spark, tmp_path: Path) -> None:
    spec = [("2024-01-01", 10), ("2024-01-01", 400), ("2024-01-02", 5), ("2024-01-02", 5), ("2024-01-02", 2000)]
    t = st.sized_files(delta_spark, tmp_path / "t", spec)
    got = sorted((a["partitionValues"]["date"], json.loads(a["stats"])["numRecords"]) for a in st.live_adds(t.path))
    assert got == sorted(spec)
    sizes = {json.loads(a["stats"])["numRecords"]: a["size"] for a in st.live_adds(t.path)}
    assert sizes[5] < sizes[10] < sizes[400] < sizes[2000]  # sizes follow row counts
