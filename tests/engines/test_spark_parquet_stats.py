"""Footer statistics for files the spark engine commits: Delta stats JSON rules, no Spark needed."""

from __future__ import annotations

import datetime as dt
import json
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from compactor.engines.footer_facts import check_written_schema
from compactor.formats.delta.apply.stats import MAX_STRING_STAT, footer_stats


def test_footer_stats_follow_delta_rules(tmp_path: Path) -> None:
    t = pa.table({
        "id": pa.array([3, 1, None, 7], pa.int64()),
        "ts": pa.array([dt.datetime(2024, 1, 1, 12, 0, 0, 123456), dt.datetime(2024, 1, 1, 11, 0, 0, 999001),
                        None, dt.datetime(2024, 1, 1, 12, 0, 0, 500000)], pa.timestamp("us", tz="UTC")),
        "s": ["b", "a", "c", "x" * (MAX_STRING_STAT + 5)],
        "blob": pa.array([b"\x00", b"\x01", None, b"\x02"], pa.binary()),
        "nested": pa.array([{"a": 1}, None, {"a": 2}, {"a": 3}]),
    })
    path = tmp_path / "f.parquet"
    pq.write_table(t, path, row_group_size=2)  # two row groups: stats must be combined
    n, raw = footer_stats(str(path))
    stats = json.loads(raw)
    assert n == stats["numRecords"] == 4
    assert stats["minValues"]["id"] == 1 and stats["maxValues"]["id"] == 7
    assert stats["nullCount"]["id"] == 1 and stats["nullCount"]["ts"] == 1
    # milliseconds like every Delta writer; the min is floored and the max rounded up so both stay bounds
    assert stats["minValues"]["ts"] == "2024-01-01T11:00:00.999Z"
    assert stats["maxValues"]["ts"] == "2024-01-01T12:00:00.500Z"
    # a max string longer than the prefix limit would be wrong when cut: it is left out
    assert "s" not in stats["minValues"] and "s" not in stats["maxValues"]
    assert "blob" not in stats["minValues"] and "nested" not in stats["minValues"]


def test_timestamp_max_rounds_up_to_the_next_millisecond(tmp_path: Path) -> None:
    t = pa.table({"ts": pa.array([dt.datetime(2024, 1, 1, 12, 0, 0, 123456)], pa.timestamp("us"))})
    path = tmp_path / "f.parquet"
    pq.write_table(t, path)
    stats = json.loads(footer_stats(str(path))[1])
    assert stats["minValues"]["ts"] == "2024-01-01T12:00:00.123Z"
    assert stats["maxValues"]["ts"] == "2024-01-01T12:00:00.124Z"


def test_check_written_schema_rejects_int96_and_extra_columns(tmp_path: Path) -> None:
    expected = pa.schema([("ts", pa.timestamp("us")), ("x", pa.int64())])
    t = pa.table({"ts": pa.array([dt.datetime(2024, 1, 1)], pa.timestamp("us")), "x": [1]})
    ok = tmp_path / "ok.parquet"
    pq.write_table(t, ok)
    check_written_schema(str(ok), expected)
    int96 = tmp_path / "int96.parquet"
    pq.write_table(t, int96, use_deprecated_int96_timestamps=True)
    with pytest.raises(ValueError, match="INT96"):
        check_written_schema(str(int96), expected)
    extra = tmp_path / "extra.parquet"
    pq.write_table(t.append_column("part", pa.array(["a"])), extra)
    with pytest.raises(ValueError, match="differ"):
        check_written_schema(str(extra), expected)


def test_check_written_schema_rejects_a_timestamp_whose_time_zone_adjustment_differs(tmp_path: Path) -> None:
    """A timestamp without time zone (Delta's timestamp_ntz) written UTC-adjusted, as pyspark 4.1's default
    schema conversion made Spark write it, and the reverse, are refused."""
    naive, utc = pa.timestamp("us"), pa.timestamp("us", tz="UTC")
    for wrote, want in ((utc, naive), (naive, utc)):
        f = tmp_path / f"{wrote.tz}.parquet"
        pq.write_table(pa.table({"ts": pa.array([dt.datetime(2024, 1, 1)], wrote)}), f)
        check_written_schema(str(f), pa.schema([("ts", wrote)]))
        with pytest.raises(ValueError, match="time zone"):
            check_written_schema(str(f), pa.schema([("ts", want)]))
