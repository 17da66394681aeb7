"""`compactor apply` exit codes and options: failures exit 1, --fail-fast, --dry-run, --metrics."""

from __future__ import annotations

import json
from pathlib import Path

from compactor.runtime.lease import TableLease
from tests.apply.helpers import exactly_once, ids, make_table
from tests.cli.test_cli import cli, project


def _two_tables(tmp_path: Path) -> tuple[Path, Path, Path, int, int]:
    a, b = tmp_path / "lake" / "a", tmp_path / "lake" / "b"
    na, nb = make_table(a, partitions=1, appends=4), make_table(b, partitions=1, appends=4)
    policy = "version: 1\ntables:\n" + "".join(
        f"  - name: {n}\n    path: {p}\n    compaction:\n      target_file_size: 1MiB\n"
        "      triggers: {min_input_files: 2}\n" for n, p in (("a", a), ("b", b)))
    return a, b, project(tmp_path / "proj", policy), na, nb


def test_failed_action_exits_1_and_fail_fast_stops(tmp_path: Path) -> None:
    a, b, p, na, nb = _two_tables(tmp_path)
    plan = tmp_path / "plan.json"
    assert cli("plan", "--project-dir", str(p), "--out", str(plan)).returncode == 0
    with TableLease(str(a), "someone-else", 60):  # another apply holds table a
        r = cli("apply", str(plan), "--project-dir", str(p), "--fail-fast", "--format", "json")
        assert r.returncode == 1, r.stdout + r.stderr
        statuses = [(x["table"], x["status"]) for x in json.loads(r.stdout)["results"]]
        assert statuses == [("a", "error")]  # b never started
        r = cli("apply", str(plan), "--project-dir", str(p), "--format", "json")
        assert r.returncode == 1
        statuses = [(x["table"], x["status"]) for x in json.loads(r.stdout)["results"]]
        assert statuses == [("a", "error"), ("b", "success")]
        assert "held by someone-else" in json.loads(r.stdout)["results"][0]["error"]
    exactly_once(a, na)
    exactly_once(b, nb)


def test_dry_run_changes_nothing_and_metrics_are_written(tmp_path: Path) -> None:
    a, b, p, na, nb = _two_tables(tmp_path)
    before = sorted(x.name for x in a.rglob("*.parquet"))
    metrics = tmp_path / "m.prom"
    r = cli("apply", "--project-dir", str(p), "--dry-run", "--metrics", str(metrics))
    assert r.returncode == 0, r.stdout + r.stderr
    assert sorted(x.name for x in a.rglob("*.parquet")) == before
    assert sum(ids(a).values()) == na
    assert metrics.exists() and metrics.stat().st_size > 0
    # a dry run writes nothing anywhere: no results, no history, no lease or journal in the tables
    assert not (p / "target" / "run_results.json").exists() and not (p / "target" / "history").exists()
    assert not (a / "_compactor").exists() and not (b / "_compactor").exists()


def test_profile_commit_groups_and_progress_lines(tmp_path: Path) -> None:
    t = tmp_path / "lake" / "t"
    n = make_table(t, partitions=3, appends=3)
    policy = (f"version: 1\ntables:\n  - name: t\n    path: {t}\n    compaction:\n      target_file_size: 1MiB\n"
              "      triggers: {min_input_files: 2}\n")
    profiles = ("default:\n  target: dev\n  outputs:\n    dev: {engine: local, max_concurrent_rewrites: 1, "
                "commit_every_bins: 1, commit_every_bytes: 1GiB, max_runtime: 1h, watch_window: 0}\n")
    p = project(tmp_path / "proj", policy, profiles)
    r = cli("apply", "--project-dir", str(p), "--auto-approve", "--format", "json")
    assert r.returncode == 0, r.stdout + r.stderr
    versions = [x["table_version_after"] for x in json.loads(r.stdout)["results"]]
    assert len(set(versions)) == 3  # one commit per partition
    assert "t: 3/3 bins" in r.stderr
    exactly_once(t, n)


def test_bad_max_runtime_is_a_usage_error(tmp_path: Path) -> None:
    a, b, p, na, nb = _two_tables(tmp_path)
    r = cli("apply", "--project-dir", str(p), "--auto-approve", "--max-runtime", "soon")
    assert r.returncode == 2 and "--max-runtime" in r.stderr and "Traceback" not in r.stderr, r.stderr
    bad = p / "profiles.yml"
    bad.write_text("default:\n  target: dev\n  outputs:\n    dev: {engine: local, commit_every_bytes: lots}\n")
    r = cli("validate", "--project-dir", str(p))
    assert r.returncode != 0 and "commit_every_bytes" in r.stdout + r.stderr and "Traceback" not in r.stderr
    exactly_once(a, na)
