"""A Spark standalone cluster (master + two 1-core workers on 127.0.0.1) for the whole test session.

Drivers for it run in subprocesses (tests/cluster/driver.py): the pytest process already owns the local
``spark`` session, and a Python process can hold only one SparkContext. This folder has no
``__init__.py`` on purpose: ``tests.cluster`` must keep naming the harness module ``tests/cluster.py``.
"""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from tests.cluster import StandaloneCluster, standalone_cluster

DRIVER = Path(__file__).with_name("driver.py")


@pytest.fixture(scope="session")
def standalone(tmp_path_factory: pytest.TempPathFactory):
    pytest.importorskip("pyspark", reason="pyspark is part of the [spark] extra")
    if shutil.which("java") is None:
        pytest.skip("no Java on PATH (.ci/run installs openjdk-17-jre-headless)")
    with standalone_cluster(tmp_path_factory.mktemp("cluster"), workers=2, cores=1, memory="1g") as c:
        yield c


@pytest.fixture
def cluster(standalone: StandaloneCluster) -> StandaloneCluster:
    """The session's cluster with two live workers (a test that killed one gets it replaced here)."""
    standalone.ensure_workers(2)
    return standalone
