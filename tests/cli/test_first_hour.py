"""The first hour of a team scheduling `compactor apply` (issue 19): a failed schedule never exits 0, and
apply returns when its work is done."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from tests.apply.helpers import exactly_once, make_table
from tests.cli.test_cli import cli, project

REPO = Path(__file__).resolve().parents[2]


def _policy(*tables: tuple[str, Path]) -> str:
    return "version: 1\ntables:\n" + "".join(
        f"  - name: {n}\n    path: {p}\n    compaction: {{target_file_size: 1MiB, triggers: {{min_input_files: 2}}}}\n"
        for n, p in tables)


def test_item_1_tables_that_cannot_be_planned_fail_the_apply(tmp_path: Path) -> None:
    """Two tables whose paths are missing or not Delta: plan says so, and apply (fresh plan or plan
    file) exits 1 naming them, never "No changes. Nothing to apply." with exit 0."""
    (tmp_path / "lake" / "not_delta").mkdir(parents=True)
    proj = project(tmp_path / "proj", _policy(("gone", tmp_path / "lake" / "gone"),
                                              ("plain", tmp_path / "lake" / "not_delta")))
    r = cli("apply", "--project-dir", str(proj), "--auto-approve")
    assert r.returncode == 1, r.stdout + r.stderr
    assert "could not be planned: gone, plain" in r.stdout + r.stderr
    assert cli("plan", "--project-dir", str(proj)).returncode == 1
    r = cli("apply", str(proj / "target" / "plan.json"), "--project-dir", str(proj))
    assert r.returncode == 1, r.stdout + r.stderr
    doc = json.loads((proj / "target" / "run_results.json").read_text())
    assert {(x["table"], x["status"]) for x in doc["results"]} == {("gone", "error"), ("plain", "error")}


def test_item_1_one_broken_table_beside_a_good_one_still_fails_the_run(tmp_path: Path) -> None:
    good = tmp_path / "lake" / "good"
    n = make_table(good, partitions=1, appends=4, rows=5)
    proj = project(tmp_path / "proj", _policy(("good", good), ("gone", tmp_path / "lake" / "gone")))
    r = cli("apply", "--project-dir", str(proj), "--auto-approve")
    assert r.returncode == 1, r.stdout + r.stderr
    exactly_once(good, n)  # the good table was compacted all the same


def _apply(proj: Path, *extra: str, env: dict[str, str] | None = None) -> subprocess.Popen:
    environ = {k: v for k, v in os.environ.items() if k not in ("COMPACTOR_WATCH_WINDOW", "COMPACTOR_SPARK_LOG")}
    return subprocess.Popen([sys.executable, "-m", "compactor", "apply", "--project-dir", str(proj), "--auto-approve",
                             *extra], cwd=REPO, env={**environ, **(env or {})}, stdout=subprocess.PIPE,
                            stderr=subprocess.STDOUT, text=True)


def test_item_2_a_default_apply_of_a_30_file_table_returns_in_seconds(tmp_path: Path) -> None:
    """The profile's default watch_window is off: the first real apply no longer idles 3 minutes."""
    t = tmp_path / "lake" / "t"
    n = make_table(t, partitions=3, appends=10, rows=5)
    proj = project(tmp_path / "proj", _policy(("t", t)))
    t0 = time.monotonic()
    p = _apply(proj)
    out = p.communicate(timeout=170)[0]
    elapsed = time.monotonic() - t0
    print(f"\ndefault apply of a 30-file table: {elapsed:.1f}s")
    assert p.returncode == 0, out
    assert "watching" not in out
    assert elapsed < 60, f"apply took {elapsed:.0f}s"
    exactly_once(t, n)


def test_item_3_ctrl_c_during_a_watch_keeps_the_run_record(tmp_path: Path) -> None:
    t = tmp_path / "lake" / "t"
    make_table(t, partitions=1, appends=4, rows=5)
    proj = project(tmp_path / "proj", _policy(("t", t)))
    p = _apply(proj, "--watch", "60s")
    lines = []
    assert p.stdout is not None
    for line in p.stdout:
        lines.append(line)
        if "watching" in line:
            break
    else:
        raise AssertionError("".join(lines))
    p.send_signal(signal.SIGINT)
    p.communicate(timeout=60)
    assert p.returncode != 0
    doc = json.loads((proj / "target" / "run_results.json").read_text())
    assert [r["status"] for r in doc["results"]] == ["success"]
    assert list((proj / "target" / "history").glob("*.json")), "the run is in `compactor history`"


def test_item_11_a_converged_table_with_vacuum_enabled_plans_no_change(tmp_path: Path) -> None:
    """With retention.vacuum.enabled, a vacuum that would delete nothing is no action: a deploy gate on
    `plan --detailed-exitcode` sees 0 once the table has converged."""
    t = tmp_path / "lake" / "t"
    make_table(t, partitions=1, appends=4, rows=5)
    policy = (f"version: 1\ntables:\n  - name: t\n    path: {t}\n"
              "    compaction: {target_file_size: 1MiB, triggers: {min_input_files: 2}}\n"
              "    retention: {deleted_file_retention: 7d, vacuum: {enabled: true}}\n")
    proj = project(tmp_path / "proj", policy)
    assert cli("plan", "--project-dir", str(proj), "--detailed-exitcode").returncode == 2
    assert cli("apply", "--project-dir", str(proj), "--auto-approve").returncode == 0
    r = cli("plan", "--project-dir", str(proj), "--detailed-exitcode", "--format", "json")
    assert r.returncode == 0, r.stdout + r.stderr
    (table,) = json.loads(r.stdout)["tables"]
    assert table["actions"] == [] and any(s["reason"] == "nothing_to_vacuum" for s in table["skipped"])


#: the capabilities by which root reads and enters every folder whatever its permissions
DAC_CAPABILITIES = "-dac_override,-dac_read_search"


def _unprivileged() -> list[str]:
    """A command prefix under which folder permissions hold. Not root: none. Root: root itself without the
    two capabilities that let it read any folder (setpriv's bounding set), so the interpreter and the
    checkout stay reachable wherever they live (a checkout under /root or a `mktemp -d` folder, which only
    their owner may enter). Where those capabilities cannot be dropped, the unprivileged user 65534, once it
    is known to run this interpreter and import compactor; otherwise the test skips, saying why."""
    import shutil

    if os.geteuid() != 0:
        return []
    setpriv = shutil.which("setpriv")
    if setpriv is None:
        pytest.skip("running as root and setpriv (util-linux) is missing: nothing can drop root's right to read "
                    "every folder, so an unreadable folder cannot be made")
    dropped = [setpriv, f"--bounding-set={DAC_CAPABILITIES}"]
    probe = subprocess.run([*dropped, sys.executable, "-c", "import compactor"], capture_output=True, text=True)
    if probe.returncode == 0:
        return dropped
    nobody = [setpriv, "--reuid=65534", "--regid=65534", "--clear-groups"]
    probe2 = subprocess.run([*nobody, sys.executable, "-c", "import compactor"], capture_output=True, text=True)
    if probe2.returncode != 0:
        pytest.skip(f"running as root, root's read-any-folder capabilities cannot be dropped here "
                    f"({(probe.stderr.strip().splitlines() or ['?'])[-1]}), and user 65534 cannot run "
                    f"{sys.executable} with compactor ({(probe2.stderr.strip().splitlines() or ['?'])[-1]}): "
                    "the checkout or its virtualenv lies under a folder only its owner may enter")
    return nobody


def test_item_4_an_unreadable_policy_folder_is_an_error_not_zero_tables() -> None:
    import shutil
    import tempfile

    prefix = _unprivileged()
    root = Path(tempfile.mkdtemp(prefix="compactor-perm-"))  # readable by the unprivileged user
    os.chmod(root, 0o755)
    proj = project(root / "proj", _policy(("t", root / "lake" / "t")))
    sub = proj / "policies" / "team"
    sub.mkdir()
    (sub / "more.yml").write_text(_policy(("u", root / "lake" / "u")))
    os.chmod(sub, 0o000)
    try:
        for args in (("validate",), ("plan",)):
            r = subprocess.run([*prefix, sys.executable, "-m", "compactor", *args, "--project-dir", str(proj)],
                               cwd=REPO, capture_output=True, text=True,
                               env={**os.environ, "HOME": str(root)})
            assert r.returncode == 2, r.stdout + r.stderr
            assert r.stderr.startswith("Error:") and "cannot read policy folder" in r.stderr, r.stderr
            assert "Traceback" not in r.stderr
    finally:
        os.chmod(sub, 0o755)
        shutil.rmtree(root)


def test_item_4_runs_wherever_the_checkout_lives(tmp_path: Path) -> None:
    """Issue 37 item 15: the test above drops root's right to read every folder. Run from an interpreter
    under a folder only its owner may enter (as a checkout under /root, or made in a `mktemp -d` folder,
    is), it still passes: it never ran that interpreter as another user who cannot reach it."""
    import site

    if os.geteuid() != 0:
        pytest.skip("only a run as root drops privileges for the test above")
    owner_only = tmp_path / "home"
    owner_only.mkdir(mode=0o700)
    venv = owner_only / "venv"
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(venv)], check=True, timeout=120)
    (site_dir,) = (venv / "lib").glob("python*/site-packages")
    (site_dir / "checkout.pth").write_text(
        "import site; " + "; ".join(f"site.addsitedir({p!r})" for p in site.getsitepackages()) + "\n")
    test = f"{Path(__file__).relative_to(REPO)}::test_item_4_an_unreadable_policy_folder_is_an_error_not_zero_tables"
    r = subprocess.run([str(venv / "bin" / "python"), "-m", "pytest", "-q", "-p", "no:cacheprovider", test],
                       cwd=REPO, capture_output=True, text=True, timeout=300)
    assert r.returncode == 0 and "1 passed" in r.stdout, r.stdout[-3000:] + r.stderr[-2000:]


def test_item_9_the_printed_next_step_works_as_printed(tmp_path: Path) -> None:
    """The hint carries --project-dir and --target when they were given, and running it as printed
    applies the plan; a plan with errors or an empty selection gives no apply hint, and an empty
    selection does not overwrite the last plan."""
    import shlex

    t = tmp_path / "lake" / "t"
    n = make_table(t, partitions=1, appends=4, rows=5)
    proj = project(tmp_path / "proj", _policy(("t", t)),
                   profiles="default:\n  target: dev\n  outputs:\n    dev: {engine: local}\n    prod: {engine: local}\n")
    r = cli("plan", "--project-dir", str(proj), "--target", "prod")
    assert r.returncode == 0, r.stderr
    hint = r.stdout.strip().splitlines()[-1]
    assert "--target prod" in hint and "--project-dir" in hint, hint
    cmd = shlex.split(hint.split("Apply exactly this plan with: ", 1)[1])
    assert cmd[:2] == ["compactor", "apply"]
    done = cli(*cmd[1:])
    assert done.returncode == 0, done.stdout + done.stderr
    exactly_once(t, n)
    plan_file = proj / "target" / "plan.json"
    before = plan_file.read_bytes()
    empty = cli("plan", "--project-dir", str(proj), "--select", "nothing_matches")
    assert "Apply exactly this plan" not in empty.stdout and plan_file.read_bytes() == before
    broken = project(tmp_path / "broken", _policy(("gone", tmp_path / "lake" / "gone")))
    r = cli("plan", "--project-dir", str(broken))
    assert r.returncode == 1 and "Apply exactly this plan" not in r.stdout and "fix them" in r.stdout


def test_item_9_a_dry_run_says_what_it_would_rewrite(tmp_path: Path) -> None:
    t = tmp_path / "lake" / "t"
    make_table(t, partitions=2, appends=3, rows=5)
    proj = project(tmp_path / "proj", _policy(("t", t)))
    r = cli("apply", "--project-dir", str(proj), "--dry-run")
    assert r.returncode == 0, r.stderr
    assert (r.stdout + r.stderr).count("would rewrite 3 file(s)") == 2, r.stdout + r.stderr


def test_item_12_piped_output_is_not_cut_at_80_columns(tmp_path: Path) -> None:
    name = "events_by_business_unit_and_region_daily_rollup_for_finance_reporting"
    t = tmp_path / "lake" / "t"
    make_table(t, partitions=1, appends=3, rows=5)
    proj = project(tmp_path / "proj", _policy((name, t)))
    env = {k: v for k, v in os.environ.items() if k != "COLUMNS"}
    for args in (("plan",), ("apply", "--auto-approve")):
        r = subprocess.run([sys.executable, "-m", "compactor", *args, "--project-dir", str(proj)], cwd=REPO,
                           capture_output=True, text=True, env=env)
        assert r.returncode == 0, r.stderr
        assert name in r.stdout, r.stdout
    doc = json.loads((proj / "target" / "run_results.json").read_text())
    r = subprocess.run([sys.executable, "-m", "compactor", "history", "--project-dir", str(proj)], cwd=REPO,
                       capture_output=True, text=True, env=env)
    assert doc["run_id"] in r.stdout, r.stdout


def test_item_7_the_demos_suggested_next_step_works_without_java(tmp_path: Path) -> None:
    """`compactor demo --no-sink` (what a machine without Java gets) suggests `compactor plan
    --project-dir compactor-demo`; run as printed, it exits 0."""
    import re
    import shlex

    r = subprocess.run([sys.executable, "-m", "compactor", "demo", "--no-sink"],
                       cwd=tmp_path, capture_output=True, text=True, env={**os.environ, "COLUMNS": "300"})
    assert r.returncode == 0, r.stdout + r.stderr
    suggested = re.findall(r"`(compactor plan --project-dir [^`]+)`", r.stdout)
    assert suggested, r.stdout
    cmd = shlex.split(suggested[-1])
    nxt = subprocess.run([sys.executable, "-m", "compactor", *cmd[1:]], cwd=tmp_path, capture_output=True, text=True)
    assert nxt.returncode == 0, nxt.stdout + nxt.stderr


def test_item_8_and_10_inspect_reports_the_planners_decision_for_a_project_table(tmp_path: Path) -> None:
    """Right after compaction, `inspect` under the policy says what `plan` says (no change), not "100% of
    files are small"; a table name from the project works as PATH, with one --project-dir for policies
    and credentials."""
    t = tmp_path / "lake" / "events"
    make_table(t, partitions=3, appends=3, rows=5)
    proj = project(tmp_path / "proj", _policy(("events", t)))
    before = cli("inspect", "events", "--project-dir", str(proj))
    assert before.returncode == 0, before.stdout + before.stderr
    assert "the plan: compact x3" in before.stdout, before.stdout
    assert cli("apply", "--project-dir", str(proj), "--auto-approve").returncode == 0
    plan = json.loads(cli("plan", "--project-dir", str(proj), "--format", "json").stdout)
    reasons = sorted(s["reason"] for s in plan["tables"][0]["skipped"])
    for args in (("events",), (str(t), "--table", "events")):
        after = cli("inspect", *args, "--project-dir", str(proj))
        assert after.returncode == 0, after.stdout + after.stderr
        assert "the plan: no change" in after.stdout, after.stdout
        assert f"skipped already_compact x{reasons.count('already_compact')} " in after.stdout, after.stdout
        assert "are small: compact them" not in after.stdout
    old = cli("inspect", str(t), "--policy-project", str(proj), "--table", "events")
    assert old.returncode == 0 and "deprecated" in old.stderr


def test_new_commands_ls_show_and_debug(tmp_path: Path) -> None:
    a, b = tmp_path / "lake" / "a", tmp_path / "lake" / "b"
    make_table(a, partitions=1, appends=3, rows=5)
    proj = project(tmp_path / "proj", _policy(("a", a), ("b", b)))
    ls = cli("ls", "--project-dir", str(proj), "--select", "a", "--format", "json")
    assert ls.returncode == 0, ls.stderr
    (row,) = json.loads(ls.stdout)["tables"]
    assert (row["name"], row["format"], row["location"]) == ("a", "delta", str(a))
    assert row["source"].startswith("policies/p.yml:")
    # debug: one line per check, exit 1 because table b's store has no Delta table
    dbg = cli("debug", "--project-dir", str(proj))
    assert dbg.returncode == 1, dbg.stdout + dbg.stderr
    assert f"OK   table a: {a}" in dbg.stdout and f"FAIL table b: {b}: no _delta_log there" in dbg.stdout
    assert cli("debug", "--project-dir", str(proj), "--select", "a").returncode == 0
    # show: a saved plan rendered again (as terraform show), an edited one refused
    assert cli("plan", "--project-dir", str(proj), "--select", "a").returncode == 0
    plan_file = proj / "target" / "plan.json"
    shown = cli("show", str(plan_file))
    assert shown.returncode == 0 and "compact" in shown.stdout and "date=2024-01-01" in shown.stdout
    md = cli("show", str(plan_file), "--format", "markdown")
    assert md.returncode == 0 and md.stdout.startswith("### compactor plan")
    doc = json.loads(cli("show", str(plan_file), "--format", "json").stdout)
    assert doc["digest"] == json.loads(plan_file.read_text())["digest"]
    plan_file.write_text(plan_file.read_text().replace('"reason":"', '"reason":"edited '))
    assert cli("show", str(plan_file)).returncode == 2


def test_item_6_a_spark_apply_keeps_spark_and_ivy_out_of_the_terminal_and_names_the_method(tmp_path: Path) -> None:
    import shutil

    import pytest

    if shutil.which("java") is None:
        pytest.skip("no Java on this machine: the spark engine cannot start")
    t = tmp_path / "lake" / "t"
    n = make_table(t, partitions=2, appends=3, rows=5)
    proj = project(tmp_path / "proj", _policy(("t", t)),
                   profiles="default:\n  outputs:\n    dev: {engine: spark, spark: {master: 'local[1]'}}\n")
    p = _apply(proj)
    out = p.communicate(timeout=600)[0]
    assert p.returncode == 0, out
    noise = [line for line in out.splitlines()
             if any(k in line for k in (":: resolving", "ivy", "Ivy", "[Stage", "WARN ", "log4j", "SparkContext"))]
    assert not noise, "\n".join(noise[:10])
    assert "(native OPTIMIZE)" in out or "(rewrite)" in out, out
    log = proj / "target" / "spark.log"
    assert log.exists() and log.stat().st_size > 0
    exactly_once(t, n)


def test_readme_quickstart_end_to_end_following_every_printed_hint(tmp_path: Path) -> None:
    """README's Quickstart as subprocesses on a real table: init, point the example policy at the table,
    validate, plan, then the apply command exactly as `plan` printed it."""
    import re
    import shlex

    def run(*args: str, cwd: Path) -> subprocess.CompletedProcess:
        r = subprocess.run([sys.executable, "-m", "compactor", *args], cwd=cwd, capture_output=True, text=True)
        assert "Traceback" not in r.stderr, r.stderr
        return r

    t = tmp_path / "lake" / "events"
    n = make_table(t, partitions=2, appends=6, rows=5)
    r = run("init", "my-lake", cwd=tmp_path)
    assert r.returncode == 0, r.stderr
    assert "then run `compactor validate`" in r.stdout
    lake = tmp_path / "my-lake"
    example = lake / "policies" / "example.yml"
    text = example.read_text().replace("\"{{ var('lake_root') }}/events\"", f'"{t}"')
    text = re.sub(r"\n\s+partitions:\n\s+lookback:[^\n]*", "", text)  # the test table's dates are old
    text = re.sub(r"quiet_period: 15m", "quiet_period: 0s", text)  # and were written a moment ago
    text = text.replace("min_input_files: 5", "min_input_files: 2")
    example.write_text(text)
    assert run("validate", cwd=lake).returncode == 0
    plan = run("plan", cwd=lake)
    assert plan.returncode == 0, plan.stdout + plan.stderr
    (hint,) = re.findall(r"Apply exactly this plan with: (.+)", plan.stdout)
    cmd = shlex.split(hint)
    assert cmd[:2] == ["compactor", "apply"]
    applied = run(*cmd[1:], cwd=lake)
    assert applied.returncode == 0, applied.stdout + applied.stderr
    exactly_once(t, n)
    assert json.loads((lake / "target" / "run_results.json").read_text())["totals"]["succeeded"] == 2
    again = run("plan", "--detailed-exitcode", cwd=lake)
    assert again.returncode == 0, again.stdout


def test_compile_emits_the_file_sources_settings_next_to_the_sinks(tmp_path: Path) -> None:
    policy = ("version: 1\ntables:\n  - name: clicks\n    path: /lake/clicks\n    format: spark_file_sink\n"
              "    sink:\n      compact_interval: 10\n      downstream_streaming_readers: none\n"
              "      source: {compact_interval: 20, cleanup_delay: 10m, max_file_age: 7d, clean_source: archive,"
              " source_archive_dir: /archive/clicks}\n")
    proj = project(tmp_path / "proj", policy)
    r = cli("compile", "--project-dir", str(proj), "--format", "json")
    assert r.returncode == 0, r.stderr
    (s,) = json.loads(r.stdout)["streaming_policies"]
    assert s["spark_conf"]["spark.sql.streaming.fileSink.log.compactInterval"] == "10"
    assert s["spark_conf"]["spark.sql.streaming.fileSource.log.compactInterval"] == "20"
    assert s["spark_conf"]["spark.sql.streaming.fileSource.log.cleanupDelay"] == "600000"
    assert s["read_stream_options"] == {"maxFileAge": "7d", "cleanSource": "archive",
                                        "sourceArchiveDir": "/archive/clicks"}
    text = cli("compile", "--project-dir", str(proj))
    assert '.readStream.option("cleanSource", "archive")' in text.stdout
