"""A real Spark standalone cluster on one machine, for tests and benchmarks.

``standalone_cluster()`` starts a master and N workers with the ``spark-class`` launcher shipped inside the
pyspark wheel (``SPARK_HOME=<pyspark package dir>``), all on 127.0.0.1, each in its own process group
(so a SIGKILL of a worker's group also kills the executors it launched), with work dirs, scratch dirs
and logs under one folder. It yields once every worker has registered with the master, and stops
everything on exit, also when the body fails.

Only one SparkContext can live in a Python process, and the pytest session already holds a local one
(the ``spark`` fixture), so drivers for the cluster run in a subprocess: ``cluster.run_driver(script,
...)`` or ``cluster.start_driver(...)``; inside the script, ``cluster_session(master_url)`` builds the
session the way compactor does (``build_session(..., delta_jars="auto")``) with small executors.

    with standalone_cluster(tmp) as c:
        c.run_driver("tests/cluster/driver.py", "roundtrip", c.master_url, str(table))
        c.kill_worker(0)              # SIGKILL the worker's process group (worker JVM + executors)
        c.workers[1].log()            # the worker's log so far
        c.executor_logs(app_id)       # every executor's stderr for one application

This module imports neither pyspark nor pytest at import time: driver scripts import it too.
"""

from __future__ import annotations

import contextlib
import json
import os
import queue
import re
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[1]
HOST = "127.0.0.1"
MASTER_CLASS = "org.apache.spark.deploy.master.Master"
WORKER_CLASS = "org.apache.spark.deploy.worker.Worker"

#: what a driver on the test cluster needs on top of build_session's defaults: small executors (one per
#: 1-core worker), few shuffle/snapshot partitions for tiny test tables, no console progress bars
DRIVER_CONF = {
    "spark.executor.memory": "1g",
    "spark.executor.cores": "1",
    "spark.cores.max": "2",
    "spark.driver.memory": "1g",
    "spark.driver.host": HOST,
    "spark.driver.bindAddress": HOST,
    "spark.sql.shuffle.partitions": "2",
    "spark.sql.session.timeZone": "UTC",
    "spark.databricks.delta.snapshotPartitions": "2",
    "spark.ui.showConsoleProgress": "false",
}


def spark_home() -> Path:
    import pyspark

    return Path(pyspark.__file__).resolve().parent


def _tail(path: Path, n: int = 40) -> str:
    try:
        return "\n".join(path.read_text(errors="replace").splitlines()[-n:])
    except OSError:
        return "(no log)"


@dataclass
class Daemon:
    """One master or worker JVM, leader of its own process group."""

    name: str
    proc: subprocess.Popen[bytes]
    log_path: Path
    work_dir: Path | None = None

    @property
    def pid(self) -> int:
        return self.proc.pid

    def alive(self) -> bool:
        return self.proc.poll() is None

    def log(self) -> str:
        return self.log_path.read_text(errors="replace") if self.log_path.exists() else ""

    def kill(self, sig: int = signal.SIGKILL, wait_s: float = 30.0) -> None:
        """Signal the whole process group (a worker's executors are in it) and reap the leader."""
        with contextlib.suppress(ProcessLookupError):
            os.killpg(self.proc.pid, sig)
        with contextlib.suppress(subprocess.TimeoutExpired):
            self.proc.wait(wait_s)

    def stop(self) -> None:
        """SIGTERM, then SIGKILL what is left of the group after 10 s."""
        if self.alive():
            self.kill(signal.SIGTERM, wait_s=10.0)
        with contextlib.suppress(ProcessLookupError):  # stragglers of the group (executors)
            os.killpg(self.proc.pid, signal.SIGKILL)
        with contextlib.suppress(subprocess.TimeoutExpired):
            self.proc.wait(10.0)


def _env(root: Path) -> dict[str, str]:
    env = dict(os.environ)
    for k in ("PYSPARK_SUBMIT_ARGS", "SPARK_CONF_DIR", "SPARK_MASTER_OPTS", "SPARK_WORKER_OPTS"):
        env.pop(k, None)
    env.update({
        "SPARK_HOME": str(spark_home()),
        "SPARK_LOCAL_IP": HOST,
        "SPARK_LOCAL_DIRS": str(root / "scratch"),
        "SPARK_DAEMON_MEMORY": "256m",
        # the REST submission server binds the fixed port 6066: other agents' clusters share the host
        "SPARK_MASTER_OPTS": "-Dspark.master.rest.enabled=false",
        "PYSPARK_PYTHON": sys.executable,
        "PYTHONPATH": os.pathsep.join([str(REPO), *filter(None, [os.environ.get("PYTHONPATH")])]),
    })
    return env


def _launch(root: Path, name: str, args: Sequence[str], work_dir: Path | None = None) -> Daemon:
    """``spark-class <args>`` as the leader of a new process group, stdout and stderr to logs/<name>.log."""
    log_path = root / "logs" / f"{name}.log"
    log_path.parent.mkdir(parents=True, exist_ok=True)
    with open(log_path, "ab") as out:
        proc = subprocess.Popen([str(spark_home() / "bin" / "spark-class"), *args], stdout=out,
                                stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL, env=_env(root), cwd=root,
                                start_new_session=True)
    return Daemon(name, proc, log_path, work_dir)


@dataclass
class StandaloneCluster:
    root: Path
    master: Daemon
    master_url: str
    cores: int
    memory: str
    workers: list[Daemon] = field(default_factory=list)
    drivers: list[subprocess.Popen[str]] = field(default_factory=list)

    # ------------------------------------------------------------------ processes

    def env(self) -> dict[str, str]:
        """Environment for daemons and driver subprocesses."""
        return _env(self.root)

    def _launch(self, name: str, args: Sequence[str], work_dir: Path | None = None) -> Daemon:
        return _launch(self.root, name, args, work_dir)

    def add_worker(self, timeout: float = 120.0) -> Daemon:
        """Start one more worker and wait until the master has registered it."""
        i = len(self.workers)
        work = self.root / f"worker{i}"
        work.mkdir(parents=True, exist_ok=True)
        before = self.master.log().count("Registering worker")
        w = self._launch(f"worker{i}", [WORKER_CLASS, "--host", HOST, "--port", "0", "--webui-port", "0",
                                         "--cores", str(self.cores), "--memory", self.memory,
                                         "--work-dir", str(work), self.master_url], work)
        self.workers.append(w)
        _wait_for(lambda: self.master.log().count("Registering worker") > before, timeout,
                  f"worker{i} did not register", [self.master, w])
        return w

    def kill_worker(self, i: int) -> float:
        """SIGKILL worker ``i``'s process group (its executors die with it); returns the kill time."""
        t = time.monotonic()
        self.workers[i].kill(signal.SIGKILL)
        return t

    def ensure_workers(self, n: int | None = None) -> None:
        """Replace dead workers so that ``n`` (default: as many as started) are alive."""
        n = len(self.workers) if n is None else n
        while sum(w.alive() for w in self.workers) < n:
            self.add_worker()

    def alive_workers(self) -> list[Daemon]:
        return [w for w in self.workers if w.alive()]

    def stop(self) -> None:
        for d in self.drivers:
            self.stop_driver(d)
        for w in self.workers:
            w.stop()
        self.master.stop()

    # ------------------------------------------------------------------ drivers

    def driver_conf(self, **extra: str) -> dict[str, str]:
        return {**DRIVER_CONF, "spark.local.dir": str(self.root / "scratch"), **extra}

    def start_driver(self, script: str | Path, *args: str, log_name: str | None = None) -> subprocess.Popen[str]:
        """A driver subprocess in its own process group (its JVM is in it); stdout is a pipe, stderr goes
        to ``logs/<log_name>.log``. Killed in ``stop()`` if still running."""
        log_path = self.root / "logs" / f"{log_name or Path(script).stem}.log"
        with open(log_path, "ab") as err:
            proc = subprocess.Popen([sys.executable, str(script), *args], stdout=subprocess.PIPE, stderr=err,
                                    stdin=subprocess.PIPE, text=True, env={**self.env(), "COMPACTOR_CLUSTER_ROOT":
                                                                           str(self.root)},
                                    cwd=REPO, start_new_session=True)
        self.drivers.append(proc)
        return proc

    def stop_driver(self, proc: subprocess.Popen[str]) -> None:
        """SIGKILL a driver subprocess's process group (the Python driver and its JVM) if still running."""
        if proc.poll() is None:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()

    def run_driver(self, script: str | Path, *args: str, timeout: float = 600.0,
                   log_name: str | None = None) -> str:
        """Run a driver script to completion; returns its stdout, raises with the driver's log on failure."""
        name = log_name or Path(script).stem
        proc = self.start_driver(script, *args, log_name=name)
        try:
            out, _ = proc.communicate(timeout=timeout)
        except subprocess.TimeoutExpired:
            self.stop_driver(proc)
            raise AssertionError(f"driver {script} timed out after {timeout}s\n"
                                 f"{_tail(self.root / 'logs' / f'{name}.log')}") from None
        if proc.returncode != 0:
            raise AssertionError(f"driver {script} exited {proc.returncode}\n{_tail(self.root / 'logs' / f'{name}.log')}")
        return out

    def serve_driver(self, script: str | Path, *args: str, log_name: str = "serve",
                     timeout: float = 300.0) -> DriverClient:
        """Start ``script serve <master_url> *args`` (tests/cluster/driver.py) and wait until it is ready."""
        proc = self.start_driver(script, "serve", self.master_url, *args, log_name=log_name)
        client = DriverClient(proc, self.root / "logs" / f"{log_name}.log")
        client.app_id = client.line("app", timeout).split()[1]
        client.executors = int(client.line("ready", timeout).split()[1])
        return client

    # ------------------------------------------------------------------ logs

    def logs(self) -> dict[str, str]:
        return {d.name: d.log() for d in [self.master, *self.workers]}

    def executor_logs(self, app_id: str) -> dict[str, str]:
        """``{"worker<i>/<executor id>": stderr}`` for every executor of ``app_id``."""
        out = {}
        for w in self.workers:
            assert w.work_dir is not None
            for d in sorted((w.work_dir / app_id).glob("*")):
                err = d / "stderr"
                if err.exists():
                    out[f"{w.name}/{d.name}"] = err.read_text(errors="replace")
        return out

    def launched_executors(self, app_id: str) -> dict[str, int]:
        """How many executors of ``app_id`` each worker was asked to launch (from the worker logs)."""
        return {w.name: w.log().count(f"Asked to launch executor {app_id}/") for w in self.workers}


class DriverClient:
    """Requests to a ``serve`` driver subprocess: one JSON line in, one ``result {...}`` line out. A reader
    thread moves its stdout into a queue, so every wait has a timeout."""

    def __init__(self, proc: subprocess.Popen[str], log_path: Path) -> None:
        self.proc, self.log_path = proc, log_path
        self.app_id = ""
        self.executors = 0
        self._lines: queue.Queue[str | None] = queue.Queue()
        threading.Thread(target=self._read, daemon=True).start()

    def _read(self) -> None:
        assert self.proc.stdout is not None
        for line in self.proc.stdout:
            self._lines.put(line.rstrip("\n"))
        self._lines.put(None)

    def log(self) -> str:
        return self.log_path.read_text(errors="replace") if self.log_path.exists() else ""

    def line(self, prefix: str, timeout: float) -> str:
        """The next stdout line starting with ``prefix`` (others are skipped)."""
        deadline = time.monotonic() + timeout
        while True:
            try:
                line = self._lines.get(timeout=max(0.0, deadline - time.monotonic()))
            except queue.Empty:
                raise AssertionError(f"driver: no '{prefix}' line within {timeout}s\n{_tail(self.log_path)}") from None
            if line is None:
                raise AssertionError(f"driver exited ({self.proc.wait()}) before a '{prefix}' line\n"
                                     f"{_tail(self.log_path)}")
            if line.startswith(prefix + " ") or line == prefix:
                return line

    def send(self, request: Mapping[str, Any]) -> None:
        assert self.proc.stdin is not None
        self.proc.stdin.write(json.dumps(request) + "\n")
        self.proc.stdin.flush()

    def result(self, timeout: float = 300.0) -> dict[str, Any]:
        return json.loads(self.line("result", timeout)[len("result "):])

    def request(self, request: Mapping[str, Any], timeout: float = 300.0) -> dict[str, Any]:
        self.send(request)
        return self.result(timeout)

    def close(self, timeout: float = 60.0) -> None:
        """Ask the driver to stop its session and exit; SIGKILL its group if it does not."""
        if self.proc.poll() is None:
            with contextlib.suppress(OSError, ValueError):
                self.send({"op": "quit"})
            try:
                self.proc.wait(timeout)
            except subprocess.TimeoutExpired:
                with contextlib.suppress(ProcessLookupError):
                    os.killpg(self.proc.pid, signal.SIGKILL)
                self.proc.wait()


class DaemonExited(RuntimeError):
    """A master or worker JVM exited while starting (the launcher or Java cannot run here)."""


def _wait_for(cond: Any, timeout: float, what: str, daemons: Sequence[Daemon]) -> None:
    deadline = time.monotonic() + timeout
    while not cond():
        dead = [d for d in daemons if not d.alive()]
        if dead or time.monotonic() > deadline:
            why = f"{dead[0].name} exited with {dead[0].proc.returncode}" if dead else f"timeout after {timeout}s"
            logs = "\n".join(f"--- {d.name}\n{_tail(d.log_path)}" for d in daemons)
            raise (DaemonExited if dead else RuntimeError)(f"{what} ({why})\n{logs}")
        time.sleep(0.2)


@contextlib.contextmanager
def standalone_cluster(root: str | Path | None = None, *, workers: int = 2, cores: int = 1, memory: str = "1g",
                       timeout: float = 180.0) -> Iterator[StandaloneCluster]:
    """Start a master and ``workers`` workers on 127.0.0.1; stop them all on exit."""
    own_root = root is None
    base = Path(tempfile.mkdtemp(prefix="compactor-cluster-")) if root is None else Path(root)
    (base / "scratch").mkdir(parents=True, exist_ok=True)
    master: Daemon | None = None
    cluster: StandaloneCluster | None = None
    try:
        # --port 0: the master picks a free port and logs it; no race with other clusters on the host
        master = _launch(base, "master", [MASTER_CLASS, "--host", HOST, "--port", "0", "--webui-port", "0"])
        pattern = re.compile(r"Starting Spark master at (spark://\S+)")
        _wait_for(lambda: pattern.search(master.log()) and "elected leader" in master.log(), timeout,
                  "the master did not start", [master])
        cluster = StandaloneCluster(base, master, pattern.search(master.log()).group(1),  # type: ignore[union-attr]
                                    cores, memory)
        for _ in range(workers):
            cluster.add_worker(timeout)
        yield cluster
    finally:
        if cluster is not None:
            cluster.stop()
        elif master is not None:
            master.stop()
        if own_root:
            shutil.rmtree(base, ignore_errors=True)


def cluster_session(master_url: str, app_name: str = "compactor-cluster", conf: Mapping[str, str] | None = None,
                    *, delta_jars: bool | str = "auto") -> Any:
    """Inside a driver subprocess: a session on the cluster, built like compactor builds its own."""
    from compactor.formats.delta.spark import build_session

    root = os.environ.get("COMPACTOR_CLUSTER_ROOT")
    extra = {"spark.local.dir": f"{root}/scratch"} if root else {}
    return build_session(master_url, app_name, {**DRIVER_CONF, **extra, **dict(conf or {})}, delta_jars=delta_jars)
