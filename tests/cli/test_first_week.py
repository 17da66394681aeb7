"""The first week of a team on a Spark-written lake (issue 37): every message tells the truth and the next
step. Each test drives the CLI as a user does."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.cli.test_cli import cli, project


def _policy(name: str, path: Path, extra: str = "") -> str:
    return (f"version: 1\ntables:\n  - name: {name}\n    path: {path}\n"
            f"    compaction: {{target_file_size: 1MiB, triggers: {{min_input_files: 2}}}}\n{extra}")


def test_item_2_a_profile_named_and_not_found_is_an_error_even_beside_the_only_one(tmp_path: Path) -> None:
    proj = project(tmp_path / "proj", _policy("t", tmp_path / "t"),
                   profiles="my-lake:\n  target: dev\n  outputs:\n    dev: {engine: local}\n")
    (proj / "compactor.yml").write_text("name: p\nprofile: mylake\n")
    for command in ("debug", "validate", "plan"):
        r = cli(command, "--project-dir", str(proj))
        assert r.returncode in (1, 2), (command, r.stdout, r.stderr)
        assert "Could not find profile named 'mylake'" in r.stdout + r.stderr, (command, r.stdout, r.stderr)
        assert "profiles there: my-lake" in r.stdout + r.stderr, (command, r.stdout, r.stderr)
    (proj / "compactor.yml").write_text("name: p\n")  # no `profile:`: the only one is used
    r = cli("validate", "--project-dir", str(proj))
    assert r.returncode == 0, r.stdout + r.stderr


def test_item_13_a_mistyped_command_or_selector_names_the_closest(tmp_path: Path) -> None:
    r = cli("plna")
    assert r.returncode == 2 and "No such command 'plna'. Did you mean 'plan'?" in r.stderr, r.stderr
    proj = project(tmp_path / "proj", _policy("events", tmp_path / "events", "    tags: [nightly]\n"))
    for command in ("ls", "validate", "plan"):
        r = cli(command, "--project-dir", str(proj), "--select", "evnts", "--select", "tag:nighly")
        assert r.returncode == 0, (command, r.stdout, r.stderr)
        assert "'evnts' does not match any table; did you mean 'events'?" in r.stderr, (command, r.stderr)
        assert "'tag:nighly' does not match any table; did you mean 'tag:nightly'?" in r.stderr, (command, r.stderr)
    r = cli("ls", "--project-dir", str(proj), "--select", "evnts")
    assert "nothing to do: no table selected" in r.stderr and "0 table(s)" in r.stdout, r.stdout + r.stderr


def test_item_13_a_closed_pipe_ends_the_command_quietly(tmp_path: Path) -> None:
    """`compactor debug | head -1`: the reader goes away; no "Error: Broken pipe", no usage-error exit."""
    import os
    import subprocess
    import sys

    proj = project(tmp_path / "proj", _policy("t", tmp_path / "t"))
    p = subprocess.Popen([sys.executable, "-m", "compactor", "debug", "--project-dir", str(proj)],
                         stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    assert p.stdout is not None and p.stderr is not None
    p.stdout.close()  # before the first line: every write of the command finds the pipe closed
    err = p.stderr.read()
    p.wait(timeout=120)
    assert "Broken pipe" not in err and "Error" not in err, err
    assert p.returncode == 141, (p.returncode, err)  # 128 + SIGPIPE, as a tool the signal ends
    assert os.path.exists(proj)


def test_item_13_bad_vars_are_one_line_and_a_hint(tmp_path: Path) -> None:
    proj = project(tmp_path / "proj", _policy("t", tmp_path / "t"))
    r = cli("validate", "--project-dir", str(proj), "--vars", "{lookback_days: 3")
    assert r.returncode == 2, r.stdout + r.stderr
    assert r.stderr.splitlines() == [
        "Error: --vars is not valid YAML/JSON: expected ',' or '}', but got '<stream end>' at character 18",
        "Hint: a mapping, e.g. --vars '{lookback_days: 3, lake_root: s3://bucket/lake}'"], r.stderr


def test_item_11_yaml_syntax_errors_show_the_source_with_a_caret_and_a_real_hint(tmp_path: Path) -> None:
    import json

    proj = project(tmp_path / "proj", "version: 1\ntables: []\n")
    files = {
        "indent.yml": "version: 1\ntables:\n  - name: a\n    path: /tmp/a\n   compaction: {target_file_size: 1MiB}\n",
        "tab.yml": "version: 1\ntables:\n  - name: d\n\tpath: /tmp/d\n",
        # unclosed at the end of the file: PyYAML's mark lies past the last line
        "brace.yml": "version: 1\ntables:\n  - name: e\n    path: /tmp/e\n    compaction: {target_file_size: 1MiB\n",
    }
    for name, text in files.items():
        (proj / "policies" / name).write_text(text)
    r = cli("validate", "--project-dir", str(proj))
    assert r.returncode == 1, r.stdout + r.stderr
    out = r.stdout.splitlines()
    first = {name: next(i for i, line in enumerate(out) if line.startswith(f"policies/{name}:")) for name in files}
    assert out[first["indent.yml"]].startswith("policies/indent.yml:5:4: yaml_syntax bad indentation: this line is "
                                               "indented 3 space(s), line 4 above it 4 (hint: the keys of one mapping "
                                               "line up: indent it by 4 spaces as line 4"), out
    assert out[first["tab.yml"]].startswith("policies/tab.yml:4:1: yaml_syntax a tab character: YAML indents with "
                                            "spaces only (hint: replace the tab on line 4 with spaces"), out
    assert out[first["brace.yml"]].startswith("policies/brace.yml:5:17: yaml_syntax the `{` opened here is never "
                                              "closed (hint: close it with `}` after its last entry"), out
    # the context is under the message, the marked line as written (nothing glued to it), a caret under the column
    i = first["brace.yml"]
    assert out[i + 1:i + 5] == ["      3 |   - name: e", "      4 |     path: /tmp/e",
                                "    > 5 |     compaction: {target_file_size: 1MiB",
                                "        |                 ^"], out[i:i + 6]
    assert "|" not in out[i], "the context is not in the hint"
    doc = json.loads(cli("validate", "--project-dir", str(proj), "--format", "json").stdout)
    (d,) = [d for d in doc["diagnostics"] if d["file"] == "policies/indent.yml"]
    assert d["context"].splitlines()[-2:] == ["> 5 |    compaction: {target_file_size: 1MiB}", "    |    ^"], d
    assert "\n" not in d["hint"], d
    (proj / "compactor.yml").write_text("name: p\nvars: {a: [1, 2}\n")  # compactor.yml: the same explanation
    r = cli("validate", "--project-dir", str(proj))
    assert r.returncode == 2 and "compactor.yml:2:16: yaml_syntax `}` closes the `[` opened at line 2 column 11" in r.stderr and "> 2 | vars: {a: [1, 2}" in r.stderr


def test_item_12_sizes_in_the_users_unit_and_no_unexplained_label(tmp_path: Path) -> None:
    from tests.apply.helpers import make_table

    t = tmp_path / "t"
    make_table(t, partitions=1, appends=4, rows=5)
    proj = project(tmp_path / "proj", f"version: 1\ntables:\n  - name: t\n    path: {t}\n"
                                      "    compaction: {target_file_size: 64MB, min_file_size: 200MB}\n")
    r = cli("validate", "--project-dir", str(proj))
    assert r.returncode == 1 and "min_file_size (200MB) is larger than target_file_size (64MB)" in r.stdout, r.stdout
    (proj / "policies" / "p.yml").write_text(_policy("t", t).replace("1MiB", "64MB"))
    r = cli("ls", "--project-dir", str(proj))
    assert "bin_pack to 64MB" in r.stdout and "MiB" not in r.stdout, r.stdout
    r = cli("plan", "--project-dir", str(proj))
    assert r.returncode == 0 and "model)" not in r.stdout, r.stdout
    r = cli("plan", "--project-dir", str(proj), "--format", "json")
    import json

    (action,) = json.loads(r.stdout)["tables"][0]["actions"]
    assert action["reason"] == "bin-pack 4 file(s) into 1 at target 64MB (packed as delta-spark's OPTIMIZE packs them)"


def test_item_12_a_dry_run_summary_says_what_its_progress_says(tmp_path: Path) -> None:
    from tests.apply.helpers import make_table

    t = tmp_path / "t"
    make_table(t, partitions=1, appends=10, rows=5)
    proj = project(tmp_path / "proj", _policy("t", t))
    r = cli("apply", "--project-dir", str(proj), "--dry-run")
    assert r.returncode == 0, r.stdout + r.stderr
    assert "would rewrite 10 file(s)" in r.stderr, r.stderr
    assert "Dry run: 1 action(s) would rewrite 10 file(s) into 1; 0 stale, 0 failed; nothing was written" in r.stdout
    assert "0 -> 0" not in r.stdout and "10 -> 1" in r.stdout, r.stdout


def test_item_12_repair_says_dry_run_only_when_asked(tmp_path: Path) -> None:
    from tests.apply.helpers import make_table

    t = tmp_path / "t"
    make_table(t, partitions=1, appends=3, rows=5)
    proj = project(tmp_path / "proj", _policy("t", t))
    r = cli("repair", "--project-dir", str(proj), "--auto-approve")
    assert r.returncode == 0 and "DRY RUN" not in r.stdout + r.stderr, r.stdout + r.stderr
    assert r.stdout.strip().endswith("0 table(s) repaired, 1 clean, 0 failed"), r.stdout
    r = cli("repair", "--project-dir", str(proj), "--dry-run")
    assert r.stdout.strip().endswith("DRY RUN: 0 table(s) to repair, 1 clean, 0 failed"), r.stdout


def test_item_12_a_slowdown_is_never_called_faster() -> None:
    """The demo's before/after scan line (cli/demo.py): its timings are real, so a slowdown cannot be forced
    through `compactor demo`; the words it prints are checked here."""
    from compactor.output.text import speed_change

    assert speed_change(1.0, 2.0) == "2.0x slower"
    assert speed_change(3.0, 1.0) == "3.0x faster"
    assert speed_change(1.0, 1.05) == "about the same"


def test_item_3_a_plan_applied_once_is_refused_the_second_time_in_one_line(tmp_path: Path) -> None:
    import json

    from tests.apply.helpers import exactly_once, make_table

    t = tmp_path / "t"
    n = make_table(t, partitions=2, appends=3, rows=5)
    proj = project(tmp_path / "proj", _policy("t", t))
    plan_file = proj / "target" / "plan.json"
    assert cli("plan", "--project-dir", str(proj)).returncode == 0
    assert cli("apply", str(plan_file), "--project-dir", str(proj)).returncode == 0
    run_id = json.loads((proj / "target" / "run_results.json").read_text())["run_id"]
    r = cli("apply", str(plan_file), "--project-dir", str(proj))
    assert r.returncode != 0, r.stdout + r.stderr
    both = r.stdout + r.stderr
    line = f"Error: this plan was applied by run {run_id}; run `compactor plan` for a new one"
    assert both.count(line) == 1 and "stale" not in both, both
    exactly_once(t, n)
    assert cli("plan", "--project-dir", str(proj), "--detailed-exitcode").returncode == 0  # nothing left


def test_item_3_a_stale_line_is_printed_once(tmp_path: Path) -> None:
    """An action that turns stale (its inputs compacted by someone else since the plan) is reported once,
    by the progress, not again in the summary."""
    from deltalake import DeltaTable

    from tests.apply.helpers import make_table

    t = tmp_path / "t"
    make_table(t, partitions=1, appends=3, rows=5)
    proj = project(tmp_path / "proj", _policy("t", t))
    assert cli("plan", "--project-dir", str(proj)).returncode == 0
    DeltaTable(str(t)).optimize.compact()  # another writer compacts the same files
    r = cli("apply", str(proj / "target" / "plan.json"), "--project-dir", str(proj))
    assert r.returncode == 0, r.stdout + r.stderr
    stale = [line for line in (r.stdout + r.stderr).splitlines() if "are no longer live" in line]
    assert len(stale) == 1, r.stdout + r.stderr


def test_item_4_apply_takes_the_plans_target(tmp_path: Path) -> None:
    import json

    from tests.apply.helpers import exactly_once, make_table

    t = tmp_path / "t"
    n = make_table(t, partitions=1, appends=3, rows=5)
    proj = project(tmp_path / "proj", _policy("t", t),
                   profiles="p:\n  target: dev\n  outputs:\n    dev: {engine: local}\n"
                            "    other: {engine: local, max_concurrent_rewrites: 1}\n")
    (proj / "compactor.yml").write_text("name: p\nprofile: p\n")
    plan_file = proj / "target" / "plan.json"
    assert cli("plan", "--project-dir", str(proj), "--target", "other").returncode == 0
    r = cli("apply", str(plan_file), "--project-dir", str(proj), "--target", "dev")
    assert r.returncode == 2, r.stdout + r.stderr
    assert f"the plan {plan_file} was made for target 'other', not 'dev'" in r.stderr, r.stderr
    assert f"apply it as planned: `compactor apply {plan_file} --project-dir {proj}`" in r.stderr, r.stderr
    r = cli("apply", str(plan_file), "--project-dir", str(proj))
    assert r.returncode == 0, r.stdout + r.stderr
    assert json.loads((proj / "target" / "run_results.json").read_text())["target"]["name"] == "other"
    exactly_once(t, n)


def _stopped(pid: int, timeout: float = 120.0) -> None:
    """Wait until process ``pid`` has stopped itself (SIGSTOP at a COMPACTOR_STOP_AT crash point)."""
    import time

    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        with open(f"/proc/{pid}/stat") as f:
            if f.read().rsplit(")", 1)[1].split()[0] == "T":
                return
        time.sleep(0.05)
    raise AssertionError("the apply never reached its stop point")


def test_item_14_ctrl_c_stops_after_the_group_under_way_and_history_lists_it(tmp_path: Path) -> None:
    """Ctrl-C while a group commits: that group finishes and is recorded, no other starts, apply exits 130, and
    `compactor history` lists the run as interrupted with what it committed."""
    import json
    import os
    import signal
    import subprocess
    import sys

    from tests.apply.helpers import exactly_once, make_table

    t = tmp_path / "t"
    n = make_table(t, partitions=3, appends=3, rows=5)
    proj = project(tmp_path / "proj", _policy("t", t),
                   profiles="default:\n  target: dev\n  outputs:\n    dev: {engine: local, commit_every_bins: 1}\n")
    assert cli("plan", "--project-dir", str(proj)).returncode == 0
    env = {k: v for k, v in os.environ.items() if k != "COMPACTOR_SPARK_LOG"}
    p = subprocess.Popen([sys.executable, "-m", "compactor", "apply", str(proj / "target" / "plan.json"),
                          "--project-dir", str(proj)], env={**env, "COMPACTOR_STOP_AT": "delta.after_commit"},
                         stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        _stopped(p.pid)  # the first group has committed
        p.send_signal(signal.SIGINT)  # Ctrl-C, delivered when the process runs again
        p.send_signal(signal.SIGCONT)
        out, err = p.communicate(timeout=120)
    finally:
        p.kill()
    assert p.returncode == 130, out + err
    assert "Interrupt received: finishing the commit group under way" in err, err
    from deltalake import DeltaTable

    version = DeltaTable(str(t)).version()  # the one commit of the run
    assert (f"Interrupted: committed 1 action(s): t (version {version}); 2 action(s) not started, left for the "
            "next run") in out, out
    (run,) = json.loads(cli("history", "--project-dir", str(proj), "--format", "json").stdout)
    assert run["interrupted"] == "after_group"
    assert sorted(r["status"] for r in run["results"]) == ["skipped", "skipped", "success"], run["results"]
    r = cli("history", "--project-dir", str(proj))
    assert "interrupted (1 committed)" in r.stdout, r.stdout
    exactly_once(t, n)
    r = cli("plan", "--project-dir", str(proj), "--format", "json")  # the next plan holds exactly the rest
    assert len(json.loads(r.stdout)["tables"][0]["actions"]) == 2


def test_item_14_stopped_at_once_the_record_says_a_group_may_have_committed(tmp_path: Path) -> None:
    """A second Ctrl-C (KeyboardInterrupt) right after a commit: the run is in `compactor history` as
    interrupted at once. The signal is raised at the crash point by a hook in this process (a second Ctrl-C's
    timing cannot be placed from outside)."""
    import json

    import pytest

    from compactor import api
    from compactor.project.model import ProjectOptions
    from compactor.runtime import faults
    from tests.apply.helpers import make_table

    t = tmp_path / "t"
    make_table(t, partitions=2, appends=3, rows=5)
    proj = project(tmp_path / "proj", _policy("t", t),
                   profiles="default:\n  target: dev\n  outputs:\n    dev: {engine: local, commit_every_bins: 1}\n")

    def ctrl_c(name: str) -> None:
        if name == "delta.after_commit":
            raise KeyboardInterrupt

    previous = faults.set_hook(ctrl_c)
    try:
        with pytest.raises(KeyboardInterrupt):
            api.apply(ProjectOptions(project_dir=proj), watch_s=0)
    finally:
        faults.set_hook(previous)
    (run,) = json.loads(cli("history", "--project-dir", str(proj), "--format", "json").stdout)
    assert run["interrupted"] == "at_once" and run["results"] == [], run
    assert "interrupted (0 committed)" in cli("history", "--project-dir", str(proj)).stdout


def test_item_9_a_quiet_period_skip_gives_the_age_and_when_the_partition_becomes_eligible(tmp_path: Path) -> None:
    import datetime as dt
    import json
    import re

    from tests.apply.helpers import make_table

    t = tmp_path / "t"
    make_table(t, partitions=1, appends=4, rows=5)
    proj = project(tmp_path / "proj", _policy("t", t).replace("min_input_files: 2}", "min_input_files: 2}, "
                                                                  "quiet_period: 1h"))
    r = cli("plan", "--project-dir", str(proj))
    assert r.returncode == 0, r.stdout + r.stderr
    m = re.search(r"skipped quiet_period x1 \(date=\S+\): its newest file is (\d+)s old, within quiet_period 1h \(a "
                  r"writer may be active\): eligible from (\S+Z) \(in (1h|\d+m \d+s|\d+m)\); plan again from then",
                  " ".join(r.stdout.split()))
    assert m, r.stdout
    eligible = dt.datetime.fromisoformat(m.group(2).replace("Z", "+00:00"))
    assert dt.timedelta(minutes=55) < eligible - dt.datetime.now(dt.UTC) <= dt.timedelta(hours=1)
    skip = json.loads(cli("plan", "--project-dir", str(proj), "--format", "json").stdout)["tables"][0]["skipped"][0]
    assert skip["details"]["eligible_at"] == m.group(2)


def test_item_10_a_file_sink_declared_as_delta_says_what_it_is_and_which_format_reads_it(tmp_path: Path) -> None:
    from tests.cli.test_inspect import make_sink

    make_sink(tmp_path / "sink")
    proj = project(tmp_path / "proj", _policy("events_sink", tmp_path / "sink"))
    r = cli("plan", "--project-dir", str(proj))
    assert r.returncode == 1, r.stdout + r.stderr
    said = " ".join(r.stdout.split())  # rich wraps a long error line at the terminal's width
    assert (f"{tmp_path / 'sink'}: not a delta table: it has _spark_metadata, so it is a spark_file_sink table; "
            "declare it with `format: spark_file_sink` in its policy (policies/p.yml:3:5)") in said, r.stdout
    assert "no _delta_log" not in r.stdout


def _dv_table(spark, path: Path):
    """The issue's table: Spark-written, deletion vectors on, a DELETE that left a DV on every file (all
    of them small)."""
    from tests import spark_tables as st

    return st.deletion_vectors(spark, path)


def _quickstart(tmp_path: Path, table: Path) -> Path:
    """README's Quickstart: `compactor init`, then the example policy pointed at the table."""
    r = cli("init", "my-lake", cwd=tmp_path)
    assert r.returncode == 0, r.stdout + r.stderr
    proj = tmp_path / "my-lake"
    (proj / "policies" / "example.yml").write_text(
        f"version: 1\ntables:\n  - name: events\n    path: {table}\n"
        "    compaction: {target_file_size: 128MB, triggers: {min_input_files: 2}}\n")
    return proj


@pytest.mark.spark
@pytest.mark.delta_jars
def test_item_7_plan_rows_are_the_live_rows_of_a_deletion_vector_table(delta_spark, tmp_path: Path) -> None:
    import json

    table = _dv_table(delta_spark, tmp_path / "events")
    proj = _quickstart(tmp_path, table.path)
    with open(proj / "profiles.yml", "a") as f:
        f.write("    prod: {engine: spark}\n")
    r = cli("plan", "--target", "prod", "--format", "json", cwd=proj)
    assert r.returncode == 0, r.stdout + r.stderr
    actions = json.loads(r.stdout)["tables"][0]["actions"]
    assert actions and sum(a["rows"] for a in actions) == table.rows == 540  # 600 written, 60 deleted by DVs


def _row_tracking_table(spark, path: Path):
    """Spark-written with row tracking on (whose row ids compactor cannot preserve), partitioned by a city
    whose every value is non-ASCII (Spark writes them raw into the log): two appends, two small files per
    partition."""
    from tests import spark_tables as st

    spark.sql(f"CREATE TABLE delta.`{path}` (id BIGINT, city STRING) USING delta PARTITIONED BY (city) "
              "TBLPROPERTIES ('delta.enableRowTracking' = 'true')")
    for start in (0, 30):
        (spark.range(start, start + 30).selectExpr("id", "element_at(array('Zürich', 'Malmö', 'Łódź'), "
                                                         "CAST(id % 3 AS INT) + 1) AS city")
         .repartition(1).write.format("delta").mode("append").save(str(path)))
    return st.SparkTable("row_tracking", str(path), 60, ("city",), ("rowTracking",))


@pytest.mark.spark
@pytest.mark.delta_jars
def test_item_8_quickstart_on_a_table_only_delta_spark_compacts_plan_inspect_and_report_say_the_same(
        delta_spark, tmp_path: Path) -> None:
    """Acceptance: plan, inspect and report give the same reason and the same next step; no false
    "already_compact", no "compact them" where the plan merges none. The table: Spark-written with row tracking
    (the issue's table had deletion vectors, then non-ASCII partition values written raw, which the local engine
    now compacts: tests/apply/test_deletion_vector_rewrite.py, tests/interop/test_kinds_matrix.py)."""
    import html
    import re

    table = _row_tracking_table(delta_spark, tmp_path / "events")
    proj = _quickstart(tmp_path, table.path)
    for spark_target, step in ((None, "use the spark engine (delta-spark's OPTIMIZE compacts it): add a target with "
                                      "`engine: spark` to profiles.yml, then `compactor plan --target <that target>`"),
                               ("prod", "use the spark engine (delta-spark's OPTIMIZE compacts it): "
                                        "`compactor plan --target prod`")):
        if spark_target:
            with open(proj / "profiles.yml", "a") as f:
                f.write(f"    {spark_target}: {{engine: spark}}\n")
        said = ("unsupported x1: rowTracking: compactor cannot preserve row ids (a copy must keep each row's id and "
                "commit version in the materialized columns, and fresh ids need the row id high water mark); "
                f"{step}")
        plan = cli("plan", cwd=proj)
        assert plan.returncode == 0, plan.stdout + plan.stderr
        plan_text = " ".join(plan.stdout.split())
        assert f"skipped {said}" in plan_text, plan.stdout
        assert "already_compact" not in plan.stdout, plan.stdout
        inspect = cli("inspect", str(table.path), cwd=proj)
        assert inspect.returncode == 0, inspect.stdout + inspect.stderr
        inspect_text = " ".join(inspect.stdout.split())
        assert f"skipped {said}" in inspect_text and "the plan: no change" in inspect_text, inspect.stdout
        assert "compact them" not in inspect.stdout and "already_compact" not in inspect.stdout
        report = cli("report", "--out", "report.html", cwd=proj)
        assert report.returncode == 0, report.stdout + report.stderr
        page = html.unescape(re.sub(r"<[^>]+>", "", (proj / "report.html").read_text()))
        assert f"The plan leaves it as it is. Skipped {said}." in " ".join(page.split()), page[-3000:]
        assert "0 small files the plan merges" in page


def test_item_8_inspect_of_a_compacted_sink_by_its_path_repeats_the_plan(tmp_path: Path) -> None:
    """Once the sink is compacted, `inspect PATH` (a path the project's policy names) says what `plan`
    says, never "compact them"."""
    from tests.cli.test_inspect import make_sink

    sink = tmp_path / "sink"
    make_sink(sink, batches=6, interval=3)  # the latest .compact (batch 5) lists all 12 files
    proj = project(tmp_path / "proj", f"version: 1\ntables:\n  - name: clicks\n    path: {sink}\n"
                                      "    format: spark_file_sink\n"
                                      "    compaction: {target_file_size: 1MiB, triggers: {min_input_files: 2}}\n"
                                      "    sink: {quiet_period: 0, downstream_streaming_readers: none}\n")
    before = cli("inspect", str(sink), "--project-dir", str(proj))
    assert "the plan: sink_compact x2 (files 12 -> 2)" in before.stdout, before.stdout
    assert cli("apply", "--project-dir", str(proj), "--auto-approve").returncode == 0
    plan = cli("plan", "--project-dir", str(proj))
    after = cli("inspect", str(sink), "--project-dir", str(proj))
    assert after.returncode == 0, after.stdout + after.stderr
    said = [line.strip() for line in plan.stdout.splitlines() if line.strip().startswith("skipped ")]
    assert said and all(f"- {line}" in after.stdout for line in said), plan.stdout + after.stdout
    assert "the plan: no change" in after.stdout and "compact them" not in after.stdout, after.stdout


def test_item_5_apply_checks_the_planned_tables_identity_at_its_path(tmp_path: Path) -> None:
    """A saved plan pins each table's location (a catalog's, without asking the catalog again at apply) and
    its identity: a table dropped and created again at that path is refused, nothing touched."""
    import json
    import shutil

    from deltalake import DeltaTable

    from tests.apply.helpers import make_table

    t = tmp_path / "t"
    make_table(t, partitions=1, appends=3, rows=5)
    proj = project(tmp_path / "proj", _policy("t", t))
    assert cli("plan", "--project-dir", str(proj)).returncode == 0
    planned = json.loads((proj / "target" / "plan.json").read_text())["tables"][0]
    assert planned["table_id"] == DeltaTable(str(t)).metadata().id
    shutil.rmtree(t)
    make_table(t, partitions=1, appends=3, rows=5)  # another table at the same path: a new table id
    new_id = DeltaTable(str(t)).metadata().id
    before = sorted(p.name for p in t.rglob("*.parquet"))
    r = cli("apply", str(proj / "target" / "plan.json"), "--project-dir", str(proj))
    assert r.returncode == 1, r.stdout + r.stderr
    assert (f"the table at {t} is not the table planned (table id {new_id}, planned {planned['table_id']})"
            in " ".join((r.stdout + r.stderr).split())), r.stdout + r.stderr
    assert sorted(p.name for p in t.rglob("*.parquet")) == before
