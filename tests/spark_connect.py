"""A real Spark Connect server on loopback, for tests, benchmarks and people (scripts/spark-connect-server).

The pyspark wheel ships Spark Connect's server jar but no ``sbin/start-connect-server.sh``; its
``bin/spark-submit`` starts the server class (``SPARK_HOME`` = the pyspark package folder) with Delta Lake
from the Ivy cache (``--packages``, the artifact ``delta.configure_spark_with_delta_pip`` asks for) and
Delta's two session settings, bound to 127.0.0.1 on a free port, as the leader of its own process group,
its output in ``<root>/connect-server.log``. ``start_connect_server`` returns once a Spark Connect session
to it has run a query (the time that took is ``started_s``: the server's JVM start); ``stop()`` ends the
process group. Small-data settings keep Delta's snapshot and listing jobs to a couple of tasks.

    with connect_server(tmp) as server:
        server.url                 # sc://127.0.0.1:PORT
        server.job_ids()           # the Spark jobs the server has finished, from its log

    python -m tests.spark_connect PORT    # in the foreground until Ctrl-C (scripts/spark-connect-server)

This module imports neither pyspark's Connect client nor pytest at import time.
"""

from __future__ import annotations

import contextlib
import os
import re
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from pathlib import Path

from tests.cluster import HOST, spark_home

SERVER_CLASS = "org.apache.spark.sql.connect.service.SparkConnectServer"
#: settings for tiny test tables (without them a VACUUM took 93 s: docs/notes, spark-setup.md)
SERVER_CONF = {
    "spark.sql.extensions": "io.delta.sql.DeltaSparkSessionExtension",
    "spark.sql.catalog.spark_catalog": "org.apache.spark.sql.delta.catalog.DeltaCatalog",
    "spark.sql.shuffle.partitions": "2",
    "spark.databricks.delta.snapshotPartitions": "2",
    "spark.sql.sources.parallelPartitionDiscovery.parallelism": "2",
    "spark.sql.session.timeZone": "UTC",
    "spark.ui.enabled": "false",
    "spark.driver.memory": "1g",
}
#: what Ivy says when the Delta jars are neither cached nor downloadable
_UNRESOLVED = re.compile(r"unresolved dependency|Error while resolving|download failed|UnknownHostException.*maven",
                         re.IGNORECASE)


class ServerUnavailable(RuntimeError):
    """The server cannot run on this machine (no Java, or the Delta jars cannot be resolved): say why."""


def delta_package() -> str:
    """The Delta artifact compactor loads for the installed pyspark and delta-spark (formats/delta/spark.py
    asks configure_spark_with_delta_pip: ``io.delta:delta-spark_4.1_2.13:4.4.0`` on pyspark 4.1)."""
    from compactor.formats.delta.spark import spark_needs

    return ",".join(spark_needs(True, True)[0].packages)


def free_port() -> int:
    with socket.socket() as s:
        s.bind((HOST, 0))
        return int(s.getsockname()[1])


@dataclass
class ConnectServer:
    port: int
    proc: subprocess.Popen[bytes]
    log_path: Path
    #: seconds from launch until a Spark Connect session ran its first query
    started_s: float = 0.0

    @property
    def url(self) -> str:
        return f"sc://{HOST}:{self.port}"

    def log(self) -> str:
        return self.log_path.read_text(errors="replace") if self.log_path.exists() else ""

    def tail(self, n: int = 40) -> str:
        return "\n".join(self.log().splitlines()[-n:])

    def job_ids(self) -> set[int]:
        """The ids of the Spark jobs the server finished so far (its DAGScheduler's log lines)."""
        return {int(m) for m in re.findall(r"DAGScheduler: Job (\d+) finished:", self.log())}

    def alive(self) -> bool:
        return self.proc.poll() is None

    def stop(self) -> None:
        """SIGTERM to the process group, SIGKILL to what is left after 15 s."""
        with contextlib.suppress(ProcessLookupError):
            os.killpg(self.proc.pid, signal.SIGTERM)
        try:
            self.proc.wait(15)
        except subprocess.TimeoutExpired:
            pass
        with contextlib.suppress(ProcessLookupError):
            os.killpg(self.proc.pid, signal.SIGKILL)
        with contextlib.suppress(subprocess.TimeoutExpired):
            self.proc.wait(10)


def server_command(port: int, conf: Mapping[str, str] | None = None) -> list[str]:
    args = [str(spark_home() / "bin" / "spark-submit"), "--class", SERVER_CLASS, "--master", "local[2]",
            "--packages", delta_package(),
            "--conf", f"spark.connect.grpc.binding.address={HOST}", "--conf", f"spark.connect.grpc.binding.port={port}"]
    for k, v in {**SERVER_CONF, **dict(conf or {})}.items():
        args += ["--conf", f"{k}={v}"]
    return args


def _env(root: Path) -> dict[str, str]:
    env = dict(os.environ)
    for k in ("PYSPARK_SUBMIT_ARGS", "SPARK_CONF_DIR", "SPARK_REMOTE", "SPARK_CONNECT_MODE_ENABLED"):
        env.pop(k, None)
    env.update({"SPARK_HOME": str(spark_home()), "SPARK_LOCAL_IP": HOST, "SPARK_LOCAL_DIRS": str(root / "scratch")})
    return env


def _session_runs(url: str) -> bool:
    """A Spark Connect session to ``url`` runs a query (one attempt: nothing listening fails at once)."""
    from compactor.engines.spark_connect import check_reachable
    from compactor.errors import UsageError

    try:
        check_reachable(url, timeout_s=2.0)
    except UsageError:
        return False
    from pyspark.sql.connect.session import SparkSession

    session = SparkSession.builder.remote(url).create()
    try:
        return bool(session.sql("SELECT 1 AS one").collect()[0]["one"] == 1)
    finally:
        session.stop()


def start_connect_server(root: Path, port: int | None = None, *, timeout_s: float = 120.0,
                         conf: Mapping[str, str] | None = None) -> ConnectServer:
    """Start a server and wait until a session runs a query. ServerUnavailable when it cannot run here;
    RuntimeError with the log's tail when it does not come up in ``timeout_s``."""
    import shutil

    if shutil.which("java") is None:
        raise ServerUnavailable("no Java on PATH (.ci/run installs openjdk-17-jre-headless)")
    root.mkdir(parents=True, exist_ok=True)
    port = port or free_port()
    log_path = root / "connect-server.log"
    t0 = time.monotonic()
    with open(log_path, "ab") as out:
        proc = subprocess.Popen(server_command(port, conf), stdout=out, stderr=subprocess.STDOUT,
                                stdin=subprocess.DEVNULL, env=_env(root), cwd=root, start_new_session=True)
    server = ConnectServer(port, proc, log_path)
    try:
        while True:
            if not server.alive():
                if _UNRESOLVED.search(server.log()):
                    raise ServerUnavailable(f"Ivy could not resolve {delta_package()} (no cached jars, no Maven "
                                            f"Central access): {server.tail(5)}")
                raise RuntimeError(f"the Spark Connect server exited ({proc.returncode}):\n{server.tail()}")
            if "Spark Connect server started" in server.log() and _session_runs(server.url):
                server.started_s = time.monotonic() - t0
                return server
            if time.monotonic() - t0 > timeout_s:
                raise RuntimeError(f"the Spark Connect server did not accept a session in {timeout_s:.0f} s:\n"
                                   f"{server.tail()}")
            time.sleep(0.5)
    except BaseException:
        server.stop()
        raise


@contextlib.contextmanager
def connect_server(root: Path, port: int | None = None, *, timeout_s: float = 120.0,
                   conf: Mapping[str, str] | None = None) -> Iterator[ConnectServer]:
    server = start_connect_server(root, port, timeout_s=timeout_s, conf=conf)
    try:
        yield server
    finally:
        server.stop()


def main(argv: list[str]) -> int:
    import tempfile

    port = int(argv[1]) if len(argv) > 1 else 15002
    root = Path(argv[2]) if len(argv) > 2 else Path(tempfile.mkdtemp(prefix="spark-connect-"))
    try:
        server = start_connect_server(root, port)
    except ServerUnavailable as e:
        print(f"cannot start a Spark Connect server here: {e}", file=sys.stderr)
        return 1
    print(f"Spark Connect server at {server.url} (up in {server.started_s:.1f} s; log {server.log_path}); "
          "Ctrl-C stops it", flush=True)
    for sig in (signal.SIGTERM, signal.SIGINT):  # SIGINT too: a shell's background job starts with it ignored
        signal.signal(sig, lambda *_: sys.exit(0))
    try:
        while server.alive():
            time.sleep(1)
        print(f"the server exited:\n{server.tail()}", file=sys.stderr)
        return 1
    except (KeyboardInterrupt, SystemExit):
        return 0
    finally:
        server.stop()


if __name__ == "__main__":
    sys.exit(main(sys.argv))
