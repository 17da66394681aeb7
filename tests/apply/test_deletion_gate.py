"""Deletion is proved, not trusted (issue 36): every file compactor deletes is checked against what the
table's log references right before the delete (runtime/deletion.py, formats/delta/read/references.py).

The headline case is a user's: a table written by delta-spark with deletion vectors and change data feed
on, files older than the retention, a policy with ``retention: {deleted_file_retention: 7d, vacuum:
{enabled: true}}``. delta-rs' full-mode VACUUM dry run named the live files' deletion vectors as orphans
(and Spark's ``.crc`` checksums); compactor took that list, and its apply deleted them: every reader that
honours deletion vectors then failed on the whole table. Each deleting path (VACUUM on both engines, crash
recovery, a failed rewrite's outputs, a sink's replaced files) is shown keeping a file the table uses."""

from __future__ import annotations

import datetime as dt
import json
import os
import time
from pathlib import Path

import pytest
from click.testing import CliRunner
from deltalake import DeltaTable, QueryBuilder

from compactor.cli import cli
from compactor.engines.spark import SparkEngine
from compactor.formats.delta import FORMAT
from compactor.formats.delta.read.references import references
from compactor.models.table import TableLocation
from compactor.planning.plan import Plan
from compactor.policy.model import Compaction, Retention, TablePolicy, Vacuum
from compactor.project.model import Target
from compactor.runtime import journal
from compactor.runtime.journal import JournalEntry
from compactor.tasks.apply import apply_plan
from compactor.tasks.plan import build_plan
from tests.spark_tables import deletion_vectors_cdf

WEEK_AND_A_DAY = 8 * 86400
SPARK = Target(engine="spark")


def _age(table: Path, seconds: float, *, only: Path | None = None) -> None:
    """Set every file's modification time (or one file's) ``seconds`` into the past."""
    when = time.time() - seconds
    for p in [only] if only is not None else [p for p in table.rglob("*") if p.is_file()]:
        os.utime(p, (when, when))


def _files(table: Path) -> set[str]:
    return {p.relative_to(table).as_posix() for p in table.rglob("*") if p.is_file()}


def _dv_files(table: Path) -> set[str]:
    """The deletion vector files live adds use, as the log names them (read with delta-spark's names)."""
    return {f for f in _files(table) if f.rsplit("/", 1)[-1].startswith("deletion_vector_")}


def _aged_dv_table(spark, tmp_path: Path) -> tuple[Path, tuple[int, ...], str, str]:
    """The user's table: written by delta-spark, every file a week and a day old, then one more UPDATE
    (a commit within the retention) whose change data file a slow writer wrote before the cutoff; and an
    orphan parquet file nobody references. Returns (table, live ids, the orphan, that change data file)."""
    t = tmp_path / "events"
    built = deletion_vectors_cdf(spark, t)
    _age(t, WEEK_AND_A_DAY)
    spark.sql(f"UPDATE delta.`{t}` SET amount = -2 WHERE id % 10 = 2")
    before = set(_files(t))
    recent_cdc = next(f for f in before if f.startswith("_change_data/") and
                      (t / f).stat().st_mtime > time.time() - 3600)
    _age(t, WEEK_AND_A_DAY, only=t / recent_cdc)  # its commit is recent, the file is not
    orphan = "date=2024-01-01/part-99999-orphan.c000.snappy.parquet"
    (t / orphan).write_bytes((t / next(f for f in before if f.endswith(".parquet") and "date=" in f)).read_bytes())
    _age(t, WEEK_AND_A_DAY, only=t / orphan)
    return t, tuple(built.extra["ids"]), orphan, recent_cdc


def _rows_read(spark, t: Path | str) -> list[int]:
    return sorted(r[0] for r in spark.sql(f"SELECT id FROM delta.`{t}`").collect())


def _rows_read_by_delta_rs(uri: str, storage_options: dict[str, str] | None = None) -> list[int]:
    dt_ = DeltaTable(uri, storage_options=storage_options)
    out = QueryBuilder().register("t", dt_).execute("SELECT id FROM t ORDER BY id").read_all()
    return [int(v) for v in out.column("id").to_pylist()]


def _change_feed_rows(spark, t: Path, version: int) -> int:
    return spark.sql(f"SELECT count(*) FROM table_changes_by_path('{t}', {version})").collect()[0][0]


def _project(root: Path, table: Path) -> Path:
    (root / "policies").mkdir(parents=True)
    (root / "compactor.yml").write_text("name: lake\n")
    (root / "policies" / "events.yml").write_text(
        "version: 1\ntables:\n  - name: events\n"
        f"    path: {table}\n"
        "    compaction: {enabled: false}\n"
        "    retention: {deleted_file_retention: 7d, vacuum: {enabled: true}}\n")
    return root


@pytest.mark.delta_jars
def test_a_deletion_vector_the_table_uses_is_never_vacuumed_on_the_local_engine(delta_spark, tmp_path: Path) -> None:
    """The user's steps through the CLI: `compactor plan`, then `compactor apply target/plan.json`. The plan
    lists the orphan and the change data of commits older than the retention; never a live file's deletion
    vector, nor Spark's ``.crc`` checksums, nor a change data file of a commit within the retention (one a
    change-feed reader of that version needs). delta-spark and delta-rs read every row afterwards, and the
    change feed of the recent commit still reads."""
    t, ids, orphan, recent_cdc = _aged_dv_table(delta_spark, tmp_path)
    dvs_before, crcs = _dv_files(t), {f for f in _files(t) if f.rsplit("/", 1)[-1].startswith(".")}
    assert dvs_before and crcs
    recent_version = DeltaTable(str(t)).version()
    project = _project(tmp_path / "lake", t)
    runner = CliRunner()
    r = runner.invoke(cli, ["plan", "--project-dir", str(project)])
    assert r.exit_code == 0, r.output
    plan = json.loads((project / "target" / "plan.json").read_text())
    (vacuum,) = [a for a in plan["tables"][0]["actions"] if a["type"] == "vacuum"]
    listed = set(vacuum["params"]["files"])
    assert orphan in listed
    assert not listed & dvs_before, f"the plan lists live deletion vectors: {sorted(listed & dvs_before)}"
    assert not listed & crcs and recent_cdc not in listed
    assert all(f.startswith("_change_data/") for f in listed - {orphan})  # older than the retention
    r = runner.invoke(cli, ["apply", str(project / "target" / "plan.json"), "--project-dir", str(project)])
    assert r.exit_code == 0, r.output
    assert not (t / orphan).exists() and dvs_before <= _files(t) and crcs <= _files(t)
    assert (t / recent_cdc).exists()
    assert _rows_read(delta_spark, t) == list(ids)
    assert _rows_read_by_delta_rs(str(t)) == list(ids)
    assert _change_feed_rows(delta_spark, t, recent_version) > 0


def _vacuum_plan(t: Path, engine: str) -> Plan:
    """`compactor plan` of a vacuum-only policy with a 7-day retention, for ``engine``."""
    policy = TablePolicy(name="events", path=str(t), compaction=Compaction(enabled=False),
                         retention=Retention(deleted_file_retention=7 * 86400, vacuum=Vacuum(enabled=True)))
    state = FORMAT.read_state(TableLocation(str(t)), policy)
    return build_plan([policy], {"events": state}, now=dt.datetime.now(dt.UTC), target=Target(engine=engine),  # type: ignore[arg-type]
                      project_name="tests")


@pytest.mark.delta_jars
def test_a_deletion_vector_the_table_uses_is_never_vacuumed_on_the_spark_engine(delta_spark, tmp_path: Path) -> None:
    """The same table on the spark engine: delta-spark's VACUUM is given as its inventory only the files
    its own dry run names that the gate passes. The orphan goes; every deletion vector, checksum and change
    data file within the retention stays; every row reads."""
    t, ids, orphan, recent_cdc = _aged_dv_table(delta_spark, tmp_path)
    dvs_before = _dv_files(t)
    plan = _vacuum_plan(t, "spark")
    run = apply_plan(plan, target=SPARK, engine=SparkEngine(SPARK))
    (r,) = [x for x in run.results if x.type == "vacuum"]
    assert r.status == "success", r.error
    assert r.details.engine == "delta-spark" and orphan in r.details.files
    assert not (t / orphan).exists() and dvs_before <= _files(t) and (t / recent_cdc).exists()
    assert _rows_read(delta_spark, t) == list(ids)
    assert _rows_read_by_delta_rs(str(t)) == list(ids)


@pytest.mark.delta_jars
def test_crash_recovery_never_deletes_a_file_the_table_uses(delta_spark, tmp_path: Path) -> None:
    """A journal entry of a dead run naming a live deletion vector file and a live data file (a damaged or
    edited entry; both are data-file names): recovery keeps both, and deletes the output nothing
    references. Before the gate, recovery kept only what delta-rs' live paths held, which has no deletion
    vector."""
    t = tmp_path / "t"
    built = deletion_vectors_cdf(delta_spark, t)
    dv = sorted(_dv_files(t))[0]
    live = sorted(DeltaTable(str(t)).get_add_actions(flatten=True).column("path").to_pylist())[0]
    (t / "date=2024-01-01" / "part-00000-dead-run.c000.snappy.parquet").write_bytes(b"torn")
    entry = JournalEntry("dead", "a", str(t), 0, outputs=[dv, live, "date=2024-01-01/part-00000-dead-run.c000.snappy.parquet"],
                         ended_at=time.time())
    journal.adopt(str(t), entry)
    deleted = FORMAT.recover(TableLocation(str(t)), grace_s=0)
    assert deleted == ["date=2024-01-01/part-00000-dead-run.c000.snappy.parquet"]
    assert (t / dv).exists() and (t / live).exists()
    assert _rows_read(delta_spark, t) == list(built.extra["ids"])


@pytest.mark.delta_jars
def test_the_gate_names_why_it_keeps_each_file(delta_spark, tmp_path: Path) -> None:
    """The reasons a run reports: a live file, its deletion vector (by its log name and by its UUID under
    any prefix a writer put before the name), a hidden name, change data within the retention."""
    t = tmp_path / "t"
    deletion_vectors_cdf(delta_spark, t)
    gate = references(TableLocation(str(t)), cutoff_ms=int(time.time() * 1000) - 3_600_000)
    dv = sorted(_dv_files(t))[0]
    live = sorted(DeltaTable(str(t)).get_add_actions(flatten=True).column("path").to_pylist())[0]
    cdc = sorted(f for f in _files(t) if f.startswith("_change_data/") and f.endswith(".parquet")
                 and not f.rsplit("/", 1)[-1].startswith("."))[0]
    crc = sorted(f for f in _files(t) if f.endswith(".crc") and not f.startswith("_"))[0]
    kept = gate.kept([dv, live, cdc, crc, "x/test-prefix-" + dv.rsplit("/", 1)[-1], "orphan.parquet"])
    assert kept[dv].startswith("the deletion vector of live file")
    assert kept["x/test-prefix-" + dv.rsplit("/", 1)[-1]] == kept[dv]
    assert kept[live] == "a live file"
    assert kept[cdc].startswith("change data of version")
    assert kept[crc].startswith("a hidden name")
    assert "orphan.parquet" not in kept


def test_recovery_keeps_an_output_a_commit_since_its_run_named_though_a_checkpoint_forgot_it(tmp_path: Path) -> None:
    """A dead run's output that a commit after the run's read version added, and another removed, is a file
    a reader of that version needs, even where a checkpoint since dropped its expired tombstone (zero
    retention): recovery keeps it (the commits after the entry's read version are read, as before the gate)."""
    import pyarrow as pa
    from deltalake import write_deltalake

    t = tmp_path / "t"
    write_deltalake(str(t), pa.table({"id": pa.array([0], pa.int64())}))
    DeltaTable(str(t)).alter.set_table_properties({"delta.deletedFileRetentionDuration": "interval 0 hours"})
    read_version = DeltaTable(str(t)).version()
    write_deltalake(str(t), pa.table({"id": pa.array([1], pa.int64())}), mode="append")
    (output,) = _commit_adds(t, read_version + 1)
    DeltaTable(str(t)).optimize.compact()  # removes the output again
    DeltaTable(str(t)).create_checkpoint()
    assert output not in _live_or_tombstoned(t)  # the checkpoint forgot its expired tombstone
    journal.adopt(str(t), JournalEntry("dead", "a", str(t), read_version, outputs=[output], ended_at=time.time()))
    assert FORMAT.recover(TableLocation(str(t)), grace_s=0) == []
    assert (t / output).exists()


def _commit_adds(t: Path, version: int) -> list[str]:
    lines = (t / "_delta_log" / f"{version:020d}.json").read_text().splitlines()
    return [json.loads(ln)["add"]["path"] for ln in lines if ln.startswith('{"add"')]


def _live_or_tombstoned(t: Path) -> set[str]:
    from compactor.formats.delta.read.log_replay import replay

    state = replay(TableLocation(str(t)))
    return {k[0] for k in state.live} | {k[0] for k in state.tombstones}
