"""A policy's ``where`` and ``lookback`` on the SOURCE columns of an Iceberg table's hidden partitioning,
projected through each spec's transforms (formats/iceberg/where.py): tables written by pyiceberg with
day/hour/month/year/identity/truncate/bucket specs, 24 rows 7 hours apart from 2025-12-30 22:00 (across a
year and a month boundary), each row written twice so every partition has two files; the plan compacts
exactly the partitions the predicate can match (inclusive, as Iceberg projects) and skips the others as
outside the where. Comparisons a transform cannot project, and where/lookback columns that do not fit,
are the policy's error at its file:line:col."""

from __future__ import annotations

import datetime as dt
from pathlib import Path
from typing import Any

import pyarrow as pa
import pytest
import yaml

pytest.importorskip("pyiceberg", reason="pyiceberg is not installed (pip install 'compactor[iceberg]')")

from pyiceberg.partitioning import PartitionField, PartitionSpec  # noqa: E402
from pyiceberg.schema import Schema  # noqa: E402
from pyiceberg.table import Table  # noqa: E402
from pyiceberg.transforms import (  # noqa: E402
    BucketTransform,
    DayTransform,
    HourTransform,
    IdentityTransform,
    MonthTransform,
    Transform,
    TruncateTransform,
    YearTransform,
)
from pyiceberg.types import (  # noqa: E402
    DateType,
    IntegerType,
    LongType,
    NestedField,
    StringType,
    TimestampType,
    TimestamptzType,
)

from compactor.formats.iceberg.plan import plan_iceberg_table  # noqa: E402
from compactor.formats.iceberg.read import as_table_state  # noqa: E402
from compactor.formats.iceberg.state import state_of  # noqa: E402
from compactor.planning.plan import TablePlan  # noqa: E402
from compactor.policy.build import build_table  # noqa: E402
from compactor.policy.yamlpos import load_yaml  # noqa: E402
from tests.iceberg.tables import catalog  # noqa: E402

SCHEMA = Schema(NestedField(1, "id", LongType()), NestedField(2, "event_ts", TimestampType()),
                NestedField(3, "event_tstz", TimestamptzType()), NestedField(4, "d", DateType()),
                NestedField(5, "name", StringType()), NestedField(6, "n", IntegerType()))
START = dt.datetime(2025, 12, 30, 22)
ROWS = 24
NOW = dt.datetime(2026, 1, 6, 12, tzinfo=dt.UTC)
COLUMN = {2: "event_ts", 3: "event_tstz", 4: "d", 5: "name", 6: "n", 1: "id"}


def _rows(first_id: int) -> pa.Table:
    ts = [START + dt.timedelta(hours=7 * k) for k in range(ROWS)]
    return pa.table({
        "id": [first_id + k for k in range(ROWS)], "event_ts": ts,
        "event_tstz": [t.replace(tzinfo=dt.UTC) for t in ts], "d": [t.date() for t in ts],
        "name": [("alpha", "beta", "gamma", "delta")[k % 4] + str(k) for k in range(ROWS)],
        "n": list(range(ROWS))}, schema=SCHEMA.as_arrow())


def _table(tmp_path: Path, name: str, *fields: tuple[int, Transform[Any, Any], str]) -> Table:
    spec = PartitionSpec(*(PartitionField(src, 1000 + i, t, n) for i, (src, t, n) in enumerate(fields)))
    t = catalog(tmp_path).create_table(f"db.{name}", schema=SCHEMA, partition_spec=spec)
    t.append(_rows(0))
    t.append(_rows(100))
    return t


def _policy(partitions: dict[str, Any]) -> Any:
    entry = {"name": "t", "format": "iceberg", "catalog": {"name": "cat", "namespace": "db", "table": "t"},
             "compaction": {"target_file_size": "1MiB", "triggers": {"min_input_files": 2},
                            "partitions": partitions}}
    text = yaml.safe_dump({"version": 1, "tables": [entry]}, sort_keys=False)
    doc, _ = load_yaml(text)
    policy, diags = build_table(entry, doc=doc, file="p.yml", base="tables[0]")
    assert not [d for d in diags if d.severity == "error"], diags
    return policy


def _plan(t: Table, partitions: dict[str, Any]) -> TablePlan:
    state = as_table_state(state_of(t, ".".join(t.name()[-2:])), t)
    return plan_iceberg_table(_policy(partitions), state, now=NOW, engine="local")


def _kept(plan: TablePlan, field: str) -> set[str | None]:
    assert plan.error is None, plan.error
    kept = {a.partition[field] for a in plan.actions if a.partition is not None}
    left = {s.partition[field] for s in plan.skipped if s.partition is not None and s.reason != "outside_where"
            and s.reason != "outside_lookback"}
    assert not left, plan.skipped  # every partition in scope is compacted (two files each)
    return kept


def _outside(plan: TablePlan, field: str) -> set[str | None]:
    return {s.partition[field] for s in plan.skipped if s.partition is not None
            and s.reason in ("outside_where", "outside_lookback")}


DAYS = ["2025-12-30", "2025-12-31"] + [f"2026-01-0{d}" for d in range(1, 7)]


@pytest.mark.parametrize(("where", "kept"), [
    ("event_ts >= '2026-01-01'", DAYS[2:]),
    ("event_ts > '2026-01-03 10:00:00'", DAYS[4:]),  # 01-03 holds rows after 10:00
    ("event_ts < '2026-01-02'", DAYS[:3]),  # a strict bound at midnight leaves 01-02 out
    ("event_ts <= '2026-01-02'", DAYS[:4]),
    ("event_ts BETWEEN '2025-12-31 12:00:00' AND '2026-01-01 00:00:00'", DAYS[1:3]),
    ("NOT (event_ts < '2026-01-05')", DAYS[6:]),
    ("event_ts IN ('2026-01-02 05:00:00', '2026-01-04 23:00:00')", ["2026-01-02", "2026-01-04"]),
    ("event_ts >= '2026-01-05' OR event_ts < '2025-12-31'", [DAYS[0], *DAYS[6:]]),
    ("event_ts >= date_sub(current_date(), 1)", DAYS[6:]),  # today is 2026-01-06
    ("event_ts = '2027-01-01'", []),
])
def test_day_of_a_timestamp(tmp_path: Path, where: str, kept: list[str]) -> None:
    t = _table(tmp_path, "day", (2, DayTransform(), "event_ts_day"))
    plan = _plan(t, {"where": where})
    assert _kept(plan, "event_ts_day") == set(kept)
    assert _outside(plan, "event_ts_day") == set(DAYS) - set(kept)
    assert all("projected through day(event_ts)" in s.message for s in plan.skipped if s.reason == "outside_where")


def test_day_of_a_timestamp_with_zone_is_judged_at_utc(tmp_path: Path) -> None:
    t = _table(tmp_path, "daytz", (3, DayTransform(), "tstz_day"))
    assert _kept(_plan(t, {"where": "event_tstz >= '2026-01-06'"}), "tstz_day") == {"2026-01-06"}
    # an instant with another zone is compared as that instant: 01-06 01:00+02:00 is 01-05 23:00 UTC
    assert _kept(_plan(t, {"where": "event_tstz >= '2026-01-06T01:00:00+02:00'"}), "tstz_day") == {
        "2026-01-05", "2026-01-06"}


@pytest.mark.parametrize(("transform", "field", "where", "kept"), [
    (HourTransform(), "ts_hour", "event_ts >= '2026-01-06 08:30:00'", {"2026-01-06-08", "2026-01-06-15"}),
    (MonthTransform(), "ts_month", "event_ts >= '2026-01-01'", {"2026-01"}),
    (MonthTransform(), "ts_month", "event_ts < '2026-01-01'", {"2025-12"}),
    (YearTransform(), "ts_year", "event_ts >= '2026-01-01'", {"2026"}),
    # a microsecond after 23:59:59 is still 2025: that year may hold a match
    (YearTransform(), "ts_year", "event_ts > '2025-12-31 23:59:59'", {"2025", "2026"}),
    (YearTransform(), "ts_year", "event_ts <= '2025-12-31 23:59:59'", {"2025"}),
])
def test_hour_month_and_year_of_a_timestamp(tmp_path: Path, transform: Transform[Any, Any], field: str,
                                           where: str, kept: set[str]) -> None:
    t = _table(tmp_path, field, (2, transform, field))
    assert _kept(_plan(t, {"where": where}), field) == kept


def test_month_and_identity_of_a_date(tmp_path: Path) -> None:
    t = _table(tmp_path, "month", (4, MonthTransform(), "d_month"))
    assert _kept(_plan(t, {"where": "d >= '2026-01-01'"}), "d_month") == {"2026-01"}
    t = _table(tmp_path, "ident", (4, IdentityTransform(), "d_ident"))
    assert _kept(_plan(t, {"where": "d > '2026-01-04'"}), "d_ident") == {"2026-01-05", "2026-01-06"}


def test_truncate_of_a_string_and_of_an_integer(tmp_path: Path) -> None:
    t = _table(tmp_path, "trunc", (5, TruncateTransform(4), "name_trunc"))
    assert _kept(_plan(t, {"where": "name LIKE 'gam%'"}), "name_trunc") == {"gamm"}
    assert _kept(_plan(t, {"where": "name >= 'delta'"}), "name_trunc") == {"delt", "gamm"}
    t = _table(tmp_path, "tens", (6, TruncateTransform(10), "n_trunc"))
    assert _kept(_plan(t, {"where": "n >= 15"}), "n_trunc") == {"10", "20"}
    assert _kept(_plan(t, {"where": "n = 3 OR n = 21"}), "n_trunc") == {"0", "20"}


def test_bucket_takes_equality(tmp_path: Path) -> None:
    t = _table(tmp_path, "bucket", (1, BucketTransform(4), "id_bucket"))
    bucket = BucketTransform(4).transform(LongType())
    assert _kept(_plan(t, {"where": "id = 5"}), "id_bucket") == {str(bucket(5))}
    assert _kept(_plan(t, {"where": "id IN (5, 106)"}), "id_bucket") == {str(bucket(5)), str(bucket(106))}


@pytest.mark.parametrize(("fields", "where", "said"), [
    (((1, BucketTransform(4), "id_bucket"),), "id > 5", "`id > 5` cannot select partitions: column id is "
     "partitioned by bucket[4](id)"),
    (((2, DayTransform(), "ts_day"),), "event_ts <> '2026-01-01'", "column event_ts is partitioned by day(event_ts)"),
    (((2, DayTransform(), "ts_day"),), "NOT (event_ts = '2026-01-01')", "`NOT event_ts = '2026-01-01'`"),
    (((2, DayTransform(), "ts_day"),), "event_ts >= 'soon'", "'soon' is not a value of event_ts"),
    (((2, DayTransform(), "ts_day"),), "to_date(event_ts) = '2026-01-01'", "compare one source column"),
    (((2, DayTransform(), "ts_day"),), "name = 'x'", "references non-partition column(s) name; the table's partition "
     "fields are: ts_day; the source columns they partition are: event_ts"),
    (((2, DayTransform(), "ts_day"), (1, BucketTransform(4), "id_bucket")), "ts_day = '2026-01-01' AND id = 3",
     "where mixes partition field(s) ts_day with source column(s) id"),
])
def test_a_where_that_cannot_select_partitions_is_the_policys_error_at_its_key(
        tmp_path: Path, fields: tuple[tuple[int, Transform[Any, Any], str], ...], where: str, said: str) -> None:
    t = _table(tmp_path, "bad", *fields)
    plan = _plan(t, {"where": where})
    assert plan.error is not None and plan.error.startswith("p.yml:14:14: "), plan.error  # the where's value
    assert said in plan.error, plan.error
    assert not plan.actions and [s.reason for s in plan.skipped] == ["invalid_policy"]


def test_where_on_partition_fields_still_evaluates_their_values(tmp_path: Path) -> None:
    t = _table(tmp_path, "fields", (2, DayTransform(), "ts_day"))
    assert _kept(_plan(t, {"where": "ts_day >= '2026-01-05'"}), "ts_day") == {"2026-01-05", "2026-01-06"}


def test_files_of_an_older_spec_are_judged_by_their_own_spec(tmp_path: Path) -> None:
    t = _table(tmp_path, "evolved", (2, MonthTransform(), "ts_month"))
    with t.update_spec() as u:
        u.remove_field("ts_month")
        u.add_field("event_ts", DayTransform(), "ts_day")
    t.append(_rows(200))
    t.append(_rows(300))
    plan = _plan(t, {"where": "event_ts >= '2026-01-03'"})
    assert plan.error is None, plan.error

    def key(p: Any) -> tuple[Any, ...]:
        return (p or {}).get("spec_id"), (p or {}).get("ts_month"), (p or {}).get("ts_day")

    # spec 1 (by day): the days from 01-03; spec 0 (by month): January may hold a match, December not (the
    # local engine leaves files of an older spec alone: in scope, January is skipped for that reason only)
    assert {key(a.partition) for a in plan.actions} == {("1", None, d) for d in DAYS[4:]}
    assert {key(s.partition) for s in plan.skipped if s.reason == "outside_where"} == {("0", "2025-12", None)} | {
        ("1", None, d) for d in DAYS[:4]}
    assert [s.reason for s in plan.skipped if key(s.partition) == ("0", "2026-01", None)] == ["iceberg_older_spec"]


def test_lookback_on_a_source_column(tmp_path: Path) -> None:
    t = _table(tmp_path, "lookback", (2, DayTransform(), "ts_day"))
    # now 2026-01-06 12:00, three days back: 2026-01-03 12:00, from its midnight on
    plan = _plan(t, {"lookback": {"column": "event_ts", "period": "3d"}})
    assert _kept(plan, "ts_day") == set(DAYS[4:])
    assert {s.reason for s in plan.skipped} == {"outside_lookback"}
    assert all("day(event_ts) holds no event_ts from 2026-01-03 on" in s.message for s in plan.skipped)
    t = _table(tmp_path, "hours", (2, HourTransform(), "ts_hour"))
    assert min(x for x in _kept(_plan(t, {"lookback": {"column": "event_ts", "period": "1d"}}), "ts_hour")
               if x is not None) == "2026-01-05-04"


@pytest.mark.parametrize(("fields", "column", "said"), [
    (((5, TruncateTransform(4), "name_trunc"),), "name", "lookback column 'name' is a string column"),
    (((2, BucketTransform(4), "ts_bucket"),), "event_ts", "column event_ts is partitioned by bucket[4](event_ts)"),
    (((2, DayTransform(), "ts_day"),), "d", "lookback column 'd' is not a partition field (ts_day) nor a source "
     "column of one (event_ts)"),
])
def test_a_lookback_that_cannot_select_partitions_is_the_policys_error(
        tmp_path: Path, fields: tuple[tuple[int, Transform[Any, Any], str], ...], column: str, said: str) -> None:
    t = _table(tmp_path, "badlb", *fields)
    plan = _plan(t, {"lookback": {"column": column, "period": "1d"}})
    assert plan.error is not None and plan.error.startswith("p.yml:15:9: "), plan.error  # the lookback's value
    assert said in plan.error, plan.error


def test_through_the_cli_a_where_on_a_source_column_plans_and_an_unprojectable_one_exits_1_at_its_line(
        tmp_path: Path) -> None:
    from tests.iceberg.project import Project

    _table(tmp_path, "events", (2, DayTransform(), "ts_day"), (1, BucketTransform(4), "id_bucket"))

    def text(where: str) -> str:
        return ("version: 1\ntables:\n  - name: t\n    format: iceberg\n"
                "    catalog: {name: cat, namespace: db, table: events}\n"
                "    compaction:\n      target_file_size: 1MiB\n      triggers: {min_input_files: 2}\n"
                f"      partitions:\n        where: \"{where}\"\n")

    project = Project.make(tmp_path, "events", policy_text=text("event_ts >= '2026-01-05' AND id = 3"))
    r = project.cli("plan")
    assert r.exit_code == 0, r.output
    days = {a["partition"]["ts_day"] for a in project.table_plan()["actions"]}
    assert days <= {"2026-01-05", "2026-01-06"} and days, project.table_plan()
    (project.root / "policies" / "t.yml").write_text(text("id < 3"))
    r = project.cli("plan")
    assert r.exit_code == 1 and "Traceback" not in r.output, r.output
    (line,) = [ln for ln in r.output.splitlines() if "cannot select partitions" in ln]
    assert "t.yml:10:16: `id < 3`" in line and "bucket[4](id)" in line, r.output
