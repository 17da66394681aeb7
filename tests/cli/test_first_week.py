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
