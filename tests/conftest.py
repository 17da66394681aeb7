"""Shared test fixtures: real fixture tables, temp copies, one session-scoped local SparkSession."""

from __future__ import annotations

import os
import shutil
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]
FIXTURES = Path(os.environ.get("COMPACTOR_FIXTURES", REPO.parent / "shared" / "fixtures"))


@pytest.fixture(scope="session")
def fixtures_dir() -> Path:
    if not FIXTURES.is_dir():
        pytest.fail(f"shared fixtures not found at {FIXTURES} (set COMPACTOR_FIXTURES)")
    return FIXTURES


@pytest.fixture
def copy_fixture(tmp_path: Path, fixtures_dir: Path):
    """Copy a fixture (relative to shared/fixtures) into tmp_path; fixtures are read-only."""

    def _copy(rel: str) -> Path:
        dst = tmp_path / Path(rel).name
        shutil.copytree(fixtures_dir / rel, dst)
        return dst

    return _copy


@pytest.fixture(scope="session")
def spark():
    """One local SparkSession for the whole test run (Spark tests share it)."""
    pyspark_sql = pytest.importorskip("pyspark.sql", reason="pyspark is part of the [spark] extra")
    session = (
        pyspark_sql.SparkSession.builder.master("local[2]")
        .appName("compactor-tests")
        .config("spark.ui.enabled", "false")
        .config("spark.sql.shuffle.partitions", "2")
        .config("spark.sql.parquet.outputTimestampType", "TIMESTAMP_MICROS")
        .config("spark.sql.session.timeZone", "UTC")
        .config("spark.driver.memory", "1g")
        .config("spark.sql.streaming.stopTimeout", "30s")
        .getOrCreate()
    )
    session.sparkContext.setLogLevel("ERROR")
    yield session
    session.stop()
