"""Human text output: user and package text prints exactly as written (never read as rich markup),
counted nouns are plural-correct, and every message ends with a newline."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pyarrow as pa
from deltalake import write_deltalake

from compactor.output.text import plural
from tests.cli.test_cli import cli, project


def test_plural() -> None:
    assert plural(1, "table policy", "table policies") == "1 table policy"
    assert plural(3, "table policy", "table policies") == "3 table policies"
    assert plural(0, "file") == "0 files"
    assert plural(1, "file") == "1 file"
    assert plural(12345, "error") == "12,345 errors"


def test_demo_without_pyspark_prints_the_extra_in_brackets_and_plural_policies(tmp_path: Path) -> None:
    code = ("import sys; sys.modules['pyspark'] = None\n"  # as if the [spark] extra were not installed
            "from compactor.cli import cli; cli(['demo', sys.argv[1]], prog_name='compactor')")
    r = subprocess.run([sys.executable, "-c", code, str(tmp_path / "demo")], capture_output=True, text=True,
                       env={k: v for k, v in os.environ.items() if k != "COLUMNS"})
    assert r.returncode == 0, r.stdout[-2000:] + r.stderr[-2000:]
    # on one line although stdout is no terminal (80 columns): a command to copy is never split
    assert "(pip install 'compactor[spark]')" in r.stdout
    assert "try `compactor plan --project-dir " in r.stdout
    assert "polic(ies)" not in r.stdout and "OK: 2 table policies in 2 files" in r.stdout, r.stdout  # no sink without Java


def test_markup_in_partition_values_and_paths_prints_verbatim(tmp_path: Path) -> None:
    table = tmp_path / "t"
    for _ in range(3):
        write_deltalake(str(table), pa.table({"region": ["[bold]eu[/bold]"] * 5, "id": list(range(5))}),
                        partition_by=["region"], mode="append")
    missing = tmp_path / "[red]gone[/red]"
    p = project(tmp_path / "proj", f"version: 1\ntables:\n  - name: t\n    path: {table}\n"
                                   "    compaction: {target_file_size: 1MiB, triggers: {min_input_files: 2}}\n"
                                   f"  - name: missing\n    path: '{missing}'\n")
    r = cli("plan", "--project-dir", str(p), "--partitions")
    assert r.returncode == 1, r.stdout + r.stderr  # the missing table cannot be planned
    assert "region=[bold]eu[/bold]" in r.stdout, r.stdout
    assert "[red]gone[/red]" in r.stdout, r.stdout
    assert "1 action on 1 of 2 tables" in r.stdout and "1 error" in r.stdout, r.stdout


def test_validate_summary_counts_nouns(tmp_path: Path) -> None:
    p = project(tmp_path, "version: 1\ntables:\n  - name: a\n    path: /x\n")
    r = cli("validate", "--project-dir", str(p))
    assert r.returncode == 0
    assert r.stdout.endswith("OK: 1 policy file; 1 table by path; 0 errors, 0 warnings\n"), r.stdout


def test_error_and_hint_end_with_a_newline(tmp_path: Path) -> None:
    r = cli("validate", "--project-dir", str(tmp_path))
    assert r.returncode == 2
    assert r.stderr.startswith("Error: no compactor.yml in ")
    assert r.stderr.endswith("Hint: run `compactor init` or pass --project-dir\n"), repr(r.stderr)
