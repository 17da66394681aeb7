"""Shared test fixtures: third-party fixture tables (when present), temp copies, and one session-scoped
local SparkSession with the Delta Lake jars and Apache Iceberg's runtime (one session serves both formats)."""

from __future__ import annotations

import os
import shutil
import tempfile
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]
# the memo of validated documents (policy/schema.py) lives in a fresh folder per test run, never the user's
os.environ["COMPACTOR_CACHE_DIR"] = tempfile.mkdtemp(prefix="compactor-test-cache-")
#: tests apply to private tables nobody else writes: no post-commit watch window (3 minutes by default)
#: unless a test asks for one (tests/duplicates)
os.environ.setdefault("COMPACTOR_WATCH_WINDOW", "0")
FIXTURES = Path(os.environ.get("COMPACTOR_FIXTURES", REPO.parent / "shared" / "fixtures"))
#: the interop corpus (tables written by Delta, delta-rs and Spark's own test suites) lives beside the
#: repository, not in it: a plain clone has none, and the tests that read it skip saying so
FIXTURES_MISSING = (f"third-party fixture tables not found at {FIXTURES} (a plain clone has none; set "
                    "COMPACTOR_FIXTURES to run these tests)")


def fixture_dirs(*groups: str) -> list[Path]:
    """Sub-directories of the given fixture groups; empty when the corpus is absent."""
    if not FIXTURES.is_dir():
        return []
    return sorted(p for g in groups if (FIXTURES / g).is_dir() for p in (FIXTURES / g).iterdir() if p.is_dir())


@pytest.fixture(scope="session")
def fixtures_dir() -> Path:
    if not FIXTURES.is_dir():
        pytest.skip(FIXTURES_MISSING)
    return FIXTURES


@pytest.fixture
def copy_fixture(tmp_path: Path, fixtures_dir: Path):
    """Copy a fixture (relative to shared/fixtures) into tmp_path; fixtures are read-only."""

    def _copy(rel: str) -> Path:
        dst = tmp_path / Path(rel).name
        shutil.copytree(fixtures_dir / rel, dst)
        return dst

    return _copy


SPARK_TEST_CONF = {
    "spark.sql.shuffle.partitions": "2",
    "spark.sql.session.timeZone": "UTC",
    "spark.driver.memory": "1g",
    "spark.sql.streaming.stopTimeout": "30s",
    # tests build many tiny tables: no need for Delta's 1 GiB defaults to matter anywhere
    "spark.databricks.delta.snapshotPartitions": "2",
}


#: why the shared session has no Apache Iceberg runtime (empty: it has one, or it was not built yet)
_ICEBERG_MISSING: list[str] = []


@pytest.fixture(scope="session")
def spark():
    """One local SparkSession for the whole test run (Spark tests share it), with the Delta Lake jars
    loaded as users load them (configure_spark_with_delta_pip) and Apache Iceberg's runtime beside them:
    one session serves both formats (tests/iceberg/spark_tables.py). When the two cannot load together,
    the session is built with Delta alone and the ``iceberg_jars`` tests skip (``iceberg_spark`` fixture)
    saying why; when the Delta jars cannot load, it starts without them and the ``delta_jars`` tests skip
    (``delta_spark`` fixture) saying why."""
    pytest.importorskip("pyspark.sql", reason="pyspark is part of the [spark] extra")
    if shutil.which("java") is None:
        pytest.skip("no Java on PATH (.ci/run installs openjdk-17-jre-headless)")
    from compactor.formats.delta.spark import build_session
    from tests.iceberg import spark_tables

    try:
        session = spark_tables.build_session("local[2]", "compactor-tests", SPARK_TEST_CONF, delta_jars=True)
    except Exception as e:  # noqa: BLE001 - a UsageError, or the JVM's launch error
        _ICEBERG_MISSING.append(
            f"Delta Lake's and Apache Iceberg's jars could not be loaded together into Spark: Ivy could not resolve "
            f"{' or '.join(spark_tables.packages())} beside Delta's jars from Maven Central on this machine, and "
            f"the shared session runs with Delta alone (the start's error, which names Delta for both: "
            f"{str(e).splitlines()[0][:200] if str(e) else type(e).__name__})")
        session = build_session("local[2]", "compactor-tests", SPARK_TEST_CONF, delta_jars="auto")
    yield session
    session.stop()


@pytest.fixture(scope="session")
def delta_spark(spark):
    """The shared session, for tests that need Delta SQL (OPTIMIZE, DESCRIBE HISTORY, Delta reads)."""
    from compactor.formats.delta.spark import delta_sql_enabled

    if not delta_sql_enabled(spark):
        pytest.skip("the Delta Lake jars could not be loaded into Spark (Ivy could not resolve "
                    "io.delta:delta-spark from Maven Central on this machine)")
    return spark


@pytest.fixture(scope="session")
def iceberg_spark(spark):
    """The shared session, for tests that write or read Iceberg tables with Spark (its catalogs are
    registered per test: tests/iceberg/spark_tables.py ``register_catalog``)."""
    from tests.iceberg.spark_tables import iceberg_loaded, runtime_package

    if not iceberg_loaded(spark):
        pytest.skip(_ICEBERG_MISSING[0] if _ICEBERG_MISSING else
                    f"the shared Spark session did not load Apache Iceberg's runtime ({runtime_package()})")
    return spark
