"""delta-rs' jemalloc is told to return freed pages (before deltalake loads), unless the user chose."""

from __future__ import annotations

import os
import subprocess
import sys

import pytest

from compactor.formats.delta.read.state import JEMALLOC_CONF

PROBE = """
import os, sys
from compactor.formats.delta.read.state import read_delta_state
from compactor.models.table import TableLocation
read_delta_state(TableLocation(sys.argv[1]))
print(os.environ.get("_RJEM_MALLOC_CONF"))
"""


@pytest.fixture(scope="module")
def table(tmp_path_factory: pytest.TempPathFactory) -> str:
    # written in a child process: this process must not load deltalake before the probes run
    path = str(tmp_path_factory.mktemp("alloc") / "t")
    code = ("import sys, pyarrow as pa\nfrom deltalake import write_deltalake\n"
            "write_deltalake(sys.argv[1], pa.table({'x': [1, 2, 3]}))")
    subprocess.run([sys.executable, "-c", code, path], check=True)
    return path


def _probe(env: dict[str, str], table: str) -> str:
    r = subprocess.run([sys.executable, "-c", PROBE, table], capture_output=True, text=True, env=env, check=True)
    return r.stdout.strip()


def test_freed_pages_are_returned_unless_the_user_configured_jemalloc(table: str) -> None:
    env = {k: v for k, v in os.environ.items() if k != "_RJEM_MALLOC_CONF"}
    assert _probe(env, table) == JEMALLOC_CONF == "dirty_decay_ms:100,muzzy_decay_ms:100"
    assert _probe({**env, "_RJEM_MALLOC_CONF": "narenas:2"}, table) == "narenas:2"


def test_too_late_once_deltalake_is_loaded() -> None:
    code = ("import os, deltalake\nfrom compactor.formats.delta.read.state import configure_delta_rs_allocator\n"
            "print(configure_delta_rs_allocator(), os.environ.get('_RJEM_MALLOC_CONF'))")
    env = {k: v for k, v in os.environ.items() if k != "_RJEM_MALLOC_CONF"}
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env, check=True)
    assert r.stdout.strip() == "False None"
