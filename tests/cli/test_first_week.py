"""The first week of a team on a Spark-written lake (issue 37): every message tells the truth and the next
step. Each test drives the CLI as a user does."""

from __future__ import annotations

from pathlib import Path

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
