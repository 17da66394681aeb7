"""An Iceberg REST catalog served on loopback for the tests: Iceberg's own reference server (the
``RESTCatalogAdapter`` and ``RESTCatalogServlet`` of ``iceberg-core``'s test jar, the pair Iceberg's
``RESTCatalogServer`` fixture serves) over a JDBC catalog on a sqlite database of its own, in Jetty 11, in
one JVM. pyiceberg's ``RestCatalog`` and Spark's ``type=rest`` catalog both talk to it.

The JVM is driven through py4j (pyspark's jar): the stock ``RESTCatalogServer`` main listens on every
interface, so the server is assembled here from the same public classes with its one connector bound to
127.0.0.1 on a free port (Jetty picks it; nothing races for it). The JVM is started in a process group of
its own and dies with this process (py4j's die-on-broken-pipe); ``stop`` ends its group.

The jars come from Maven Central once, through Ivy (pyspark's ``ivy`` jar, standalone) into Ivy's default
cache ``~/.ivy2/cache``; a second resolution is answered from the cache in about a second. Hadoop's client
jars (``HadoopFileIO`` of the JDBC catalog) are pyspark's own. The server is Iceberg 1.10.0, the release
issue 39 measured serving here (``iceberg-open-api``'s 1.12.0 test fixtures are not published); the
clients are pyiceberg 0.12 and Spark's Iceberg 1.12.0, over the same REST protocol. ``RestServerUnavailable``
says why it cannot run here (no Java, no pyspark, Ivy could not resolve the jars)."""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
import tempfile
import time
import urllib.request
import uuid
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

#: the Maven coordinates Ivy resolves (with their runtime dependencies): org, name, version, classifiers
ICEBERG_SERVER_VERSION = "1.10.0"
DEPENDENCIES = (
    ("org.apache.iceberg", "iceberg-core", ICEBERG_SERVER_VERSION, ("", "tests")),
    ("org.eclipse.jetty", "jetty-servlet", "11.0.25", ("",)),
    ("org.xerial", "sqlite-jdbc", "3.54.1.0", ("",)),
    ("org.slf4j", "slf4j-simple", "2.0.17", ("",)),
)
#: Ivy's default cache (Spark's own Ivy home, ``~/.ivy2.5.2``, is left to Spark)
IVY_CACHE = Path.home() / ".ivy2" / "cache"
RESOLVE_TIMEOUT_S = 900.0
READY_TIMEOUT_S = 60.0
#: Jetty's request log line: when it was received, method, path, query, status and the Authorization header (``Bearer <token>`` as the
#: server issued it, ``-`` without one)
REQUEST_LOG_FORMAT = "%{yyyy-MM-dd'T'HH:mm:ss.SSS|UTC}t %m %U %q %s %{Authorization}i"
#: the query parameter of ``RestServer.mark``'s requests
MARK = "compactor-mark"


class RestServerUnavailable(RuntimeError):
    """The REST catalog cannot run here; the message says why."""


@dataclass
class RestServer:
    """A running server: ``uri`` (``http://127.0.0.1:<port>``) and the catalog's warehouse, under ``root``."""

    uri: str
    warehouse: str
    root: Path
    proc: subprocess.Popen[bytes]
    gateway: Any = field(repr=False)

    def stop(self) -> None:
        """End the server's JVM (its whole process group) and wait for it."""
        try:
            self.gateway.shutdown()
        except Exception:  # noqa: BLE001 - the JVM may be gone already; its process group is ended below
            pass
        _end_group(self.proc)

    def log_tail(self, chars: int = 1500) -> str:
        return _tail(self.root / "server.log", chars)

    def requests(self) -> list[RestRequest]:
        """The requests the server has logged so far, in the order it received them (marks included)."""
        out = []
        for line in _tail(self.root / "requests.log", 10**9).splitlines():
            if line.count(" ") >= 5:
                received, method, path, query, status, authorization = line.split(" ", 5)
                out.append(RestRequest(received, method, path, "" if query == "?null" else query, status,
                                       authorization))
        return sorted(out, key=lambda q: q.received)

    def mark(self) -> str:
        """Send a marker request; returns its name, for ``since``."""
        name = uuid.uuid4().hex
        with urllib.request.urlopen(f"{self.uri}/v1/config?{MARK}={name}", timeout=10):
            pass
        return name

    def since(self, start: str) -> list[RestRequest]:
        """The requests received after the marker ``start`` and before this call (marks left out). Jetty
        logs a request after answering it, not always in the order it received them: this waits for a
        marker of its own and for the log to stop growing, then orders the lines by their receipt."""
        end, previous = self.mark(), -1
        deadline = time.monotonic() + 10
        while time.monotonic() < deadline:
            logged = self.requests()
            if len(logged) == previous and any(q.query == f"?{MARK}={end}" for q in logged):
                times = {q.query: q.received for q in logged}
                lo, hi = times[f"?{MARK}={start}"], times[f"?{MARK}={end}"]
                return [q for q in logged if lo <= q.received <= hi and not q.query.startswith(f"?{MARK}=")]
            previous = len(logged)
            time.sleep(0.3)
        raise AssertionError(f"the REST catalog at {self.uri} did not log the marker request {end}")


@dataclass(frozen=True)
class RestRequest:
    """One line of the server's request log."""

    #: when the server received it (UTC, to the millisecond: ISO text, so it sorts as text)
    received: str
    method: str
    path: str
    #: ``?a=b``, or empty (Jetty logs an absent query as ``?null``)
    query: str
    status: str
    authorization: str

    @property
    def bearer(self) -> bool:
        return self.authorization.startswith("Bearer ")


def _pyspark_jars() -> Path:
    try:
        import pyspark
    except ImportError:
        raise RestServerUnavailable("pyspark is not installed: its jars hold Ivy, py4j and Hadoop's client "
                                    "(pip install 'compactor[spark]')") from None
    return Path(pyspark.__file__).parent / "jars"


def _one(jars: Path, pattern: str) -> Path:
    found = sorted(jars.glob(pattern))
    if not found:
        raise RestServerUnavailable(f"no {pattern} in {jars}")
    return found[-1]


def _ivy_module() -> str:
    deps = []
    for org, name, rev, classifiers in DEPENDENCIES:
        artifacts = "".join(f'<artifact name="{name}" type="jar"' + (f' m:classifier="{c}"' if c else "") + "/>"
                            for c in classifiers)
        deps.append(f'<dependency org="{org}" name="{name}" rev="{rev}" conf="default">{artifacts}</dependency>')
    return ('<ivy-module version="2.0" xmlns:m="http://ant.apache.org/ivy/maven">'
            '<info organisation="compactor.tests" module="rest-catalog"/>'
            f'<dependencies>{"".join(deps)}</dependencies></ivy-module>')


def resolve_classpath() -> list[str]:
    """The server's jars, resolved by Ivy from Maven Central (once; then from ``IVY_CACHE``), and Hadoop's
    client jars from pyspark. Raises RestServerUnavailable naming what could not be resolved and why."""
    if shutil.which("java") is None:
        raise RestServerUnavailable("no Java on PATH (./scripts/test installs openjdk-17-jre-headless)")
    jars = _pyspark_jars()
    ivy = _one(jars, "ivy-*.jar")
    with tempfile.TemporaryDirectory(prefix="compactor-rest-ivy-") as work:
        module, listing = Path(work) / "ivy.xml", Path(work) / "classpath.txt"
        module.write_text(_ivy_module())
        try:
            done = subprocess.run(["java", "-jar", str(ivy), "-ivy", str(module), "-confs", "default",
                                   "-cache", str(IVY_CACHE), "-cachepath", str(listing)],
                                  capture_output=True, text=True, timeout=RESOLVE_TIMEOUT_S)
        except subprocess.TimeoutExpired:
            raise RestServerUnavailable(f"Ivy did not resolve the REST catalog's jars within {RESOLVE_TIMEOUT_S:.0f} s") from None
        if done.returncode != 0 or not listing.exists():
            wanted = ", ".join(f"{o}:{n}:{r}" for o, n, r, _ in DEPENDENCIES)
            lines = [ln.strip(": \t") for ln in (done.stdout + done.stderr).splitlines()
                     if any(w in ln for w in ("not found", "rror", "UNRESOLVED", "FAILED"))]
            raise RestServerUnavailable(f"Ivy could not resolve the REST catalog's jars ({wanted}) from Maven "
                                        f"Central: {' | '.join(lines[-6:]) or done.returncode}")
        resolved = [p for p in listing.read_text().strip().split(os.pathsep) if p]
    return [*resolved, str(_one(jars, "hadoop-client-api-*.jar")), str(_one(jars, "hadoop-client-runtime-*.jar"))]


def _tail(path: Path, chars: int) -> str:
    try:
        return path.read_text(errors="replace")[-chars:]
    except OSError:
        return ""


def _end_group(proc: subprocess.Popen[bytes]) -> None:
    if proc.poll() is None:
        try:
            os.killpg(proc.pid, signal.SIGTERM)
        except ProcessLookupError:
            pass
        try:
            proc.wait(timeout=20)
        except subprocess.TimeoutExpired:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()
    for stream in (proc.stdin, proc.stdout):
        if stream is not None:
            stream.close()


def _answers(uri: str) -> bool:
    try:
        with urllib.request.urlopen(f"{uri}/v1/config", timeout=2) as r:
            return bool(r.status == 200)
    except OSError:
        return False


def start_rest_server(root: Path) -> RestServer:
    """A REST catalog on 127.0.0.1 whose sqlite database (``root/catalog.db``) and warehouse
    (``root/warehouse``) are its own, answering ``GET /v1/config`` when returned."""
    classpath = resolve_classpath()  # first: it says why when Java or pyspark (and so py4j) is missing
    from py4j.java_gateway import GatewayParameters, JavaGateway, launch_gateway

    root = Path(root).resolve()
    (root / "warehouse").mkdir(parents=True, exist_ok=True)
    with (root / "server.log").open("wb") as log:
        try:
            port, proc = launch_gateway(jarpath=str(_one(_pyspark_jars(), "py4j-*.jar")),
                                        classpath=os.pathsep.join(classpath), javaopts=["-Xmx256m"],
                                        die_on_exit=True, redirect_stderr=log, create_new_process_group=True,
                                        return_proc=True)
        except ValueError:  # py4j reads the gateway's port from the JVM's first line: it wrote none
            raise RestServerUnavailable(f"the REST catalog's JVM did not start: {_tail(root / 'server.log', 800)}") from None
    gateway = JavaGateway(gateway_parameters=GatewayParameters(port=port, auto_convert=True))
    warehouse = f"file://{root / 'warehouse'}"
    try:
        uri = _serve(gateway.jvm, {"uri": f"jdbc:sqlite:{root / 'catalog.db'}", "jdbc.schema-version": "V1",
                                   "warehouse": warehouse}, str(root / "requests.log"))
    except Exception as e:  # noqa: BLE001 - py4j wraps the JVM's exceptions
        gateway.close()
        _end_group(proc)
        raise RestServerUnavailable(f"the REST catalog did not start: {str(e).splitlines()[0] if str(e) else e!r} "
                                    f"({_tail(root / 'server.log', 800)})") from None
    server = RestServer(uri, warehouse, root, proc, gateway)
    deadline = time.monotonic() + READY_TIMEOUT_S
    while not _answers(uri):
        if time.monotonic() > deadline or proc.poll() is not None:
            tail = server.log_tail(800)
            server.stop()
            raise RestServerUnavailable(f"the REST catalog at {uri} did not answer within {READY_TIMEOUT_S:.0f} s: {tail}")
        time.sleep(0.2)
    return server


def _serve(jvm: Any, properties: dict[str, str], request_log: str) -> str:
    """Start the servlet over a JDBC catalog of ``properties`` in ``jvm``, on a Jetty connector bound to
    127.0.0.1 on a port Jetty picks, logging each request to ``request_log``; returns the server's URI."""
    props = jvm.java.util.HashMap()
    for k, v in {"catalog-impl": "org.apache.iceberg.jdbc.JdbcCatalog", **properties}.items():
        props.put(k, v)
    catalog = jvm.org.apache.iceberg.CatalogUtil.buildIcebergCatalog("rest_backend", props,
                                                                     jvm.org.apache.hadoop.conf.Configuration())
    servlet = jvm.org.apache.iceberg.rest.RESTCatalogServlet(jvm.org.apache.iceberg.rest.RESTCatalogAdapter(catalog))
    jetty = jvm.org.eclipse.jetty
    context = jetty.servlet.ServletContextHandler(jetty.servlet.ServletContextHandler.NO_SESSIONS)
    context.addServlet(jetty.servlet.ServletHolder(servlet), "/*")
    server = jetty.server.Server()
    connector = jetty.server.ServerConnector(server)
    connector.setHost("127.0.0.1")
    connector.setPort(0)
    server.addConnector(connector)
    server.setHandler(context)
    server.setRequestLog(jetty.server.CustomRequestLog(request_log, REQUEST_LOG_FORMAT))
    server.start()
    return f"http://127.0.0.1:{connector.getLocalPort()}"
