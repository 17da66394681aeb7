"""A Spark standalone cluster (master + two 1-core workers on 127.0.0.1) and one driver application on it
for the tests of a module (module scope, not session: the JVMs, ~4 GiB with executors, stop as soon as
the module's last test is done instead of idling through the rest of the suite; keep the cluster tests in
one module).

The driver runs in a subprocess (tests/cluster/driver.py ``serve``): the pytest process already owns the
local ``spark`` session, and a Python process can hold only one SparkContext. One driver serves every
test (each JVM start costs ~10-20 s on this machine). This folder has no ``__init__.py`` on purpose:
``tests.cluster`` must keep naming the harness module ``tests/cluster.py``.
"""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from tests.cluster import DaemonExited, DriverClient, StandaloneCluster, spark_home, standalone_cluster

DRIVER = Path(__file__).with_name("driver.py")


@pytest.fixture(scope="module")
def standalone(tmp_path_factory: pytest.TempPathFactory):
    pytest.importorskip("pyspark", reason="pyspark is part of the [spark] extra")
    if shutil.which("java") is None:
        pytest.skip("no Java on PATH (.ci/run installs openjdk-17-jre-headless)")
    if not (spark_home() / "bin" / "spark-class").exists():
        pytest.skip(f"no bin/spark-class in the pyspark package at {spark_home()}")
    try:
        cm = standalone_cluster(tmp_path_factory.mktemp("cluster"), workers=2, cores=1, memory="1g")
        c = cm.__enter__()
    except DaemonExited as e:  # the JVM could not start at all (not a timeout: that fails the tests)
        pytest.skip(f"spark-class could not start a standalone master/worker here: {e}")
    try:
        yield c
    finally:
        cm.__exit__(None, None, None)


@pytest.fixture(scope="module")
def driver(standalone: StandaloneCluster) -> DriverClient:
    """One application on the cluster for every test, with both executors registered."""
    client = standalone.serve_driver(DRIVER)
    assert client.executors == 2, f"the driver has {client.executors} executors, expected 2\n{client.log()[-3000:]}"
    yield client
    client.close()


@pytest.fixture
def cluster(standalone: StandaloneCluster, driver: DriverClient) -> StandaloneCluster:
    """The session's cluster with two live workers and the driver holding an executor on each (a test that
    killed a worker gets it replaced here)."""
    if len(standalone.alive_workers()) < 2:
        standalone.ensure_workers(2)
        assert driver.request({"op": "executors", "wait_for": 2}, timeout=180)["executors"] == 2
    return standalone
