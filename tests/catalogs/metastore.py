"""A Hive metastore served over thrift on loopback, for the tests: Hive 2.3's ``HiveMetaStore`` from the jars
pyspark ships, on an embedded Derby database of its own (one JVM, about 6 s to answer here).

pyiceberg's HiveCatalog takes a lock on every commit, which Hive keeps in its transaction tables; DataNucleus
creates the metastore's own tables but not those (Hive's schema tool does), so the few tables the lock calls
use are created first with Derby's ``ij``. ``MetastoreUnavailable`` says why the server cannot run here
(no Java, no pyspark jars, no thrift client)."""

from __future__ import annotations

import shutil
import socket
import subprocess
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

READY_TIMEOUT_S = 90.0

#: the lock tables of Hive 2.3's transaction schema, as its lock, check_lock and unlock calls read them
_LOCK_TABLES = """
CREATE TABLE TXNS (TXN_ID BIGINT PRIMARY KEY, TXN_STATE CHAR(1) NOT NULL, TXN_STARTED BIGINT NOT NULL,
  TXN_LAST_HEARTBEAT BIGINT NOT NULL, TXN_USER VARCHAR(128) NOT NULL, TXN_HOST VARCHAR(128) NOT NULL,
  TXN_AGENT_INFO VARCHAR(128), TXN_META_INFO VARCHAR(128), TXN_HEARTBEAT_COUNT INTEGER);
CREATE TABLE HIVE_LOCKS (HL_LOCK_EXT_ID BIGINT NOT NULL, HL_LOCK_INT_ID BIGINT NOT NULL, HL_TXNID BIGINT,
  HL_DB VARCHAR(128) NOT NULL, HL_TABLE VARCHAR(128), HL_PARTITION VARCHAR(767), HL_LOCK_STATE CHAR(1) NOT NULL,
  HL_LOCK_TYPE CHAR(1) NOT NULL, HL_LAST_HEARTBEAT BIGINT NOT NULL, HL_ACQUIRED_AT BIGINT,
  HL_USER VARCHAR(128) NOT NULL, HL_HOST VARCHAR(128) NOT NULL, HL_HEARTBEAT_COUNT INTEGER,
  HL_AGENT_INFO VARCHAR(128), HL_BLOCKEDBY_EXT_ID BIGINT, HL_BLOCKEDBY_INT_ID BIGINT,
  PRIMARY KEY (HL_LOCK_EXT_ID, HL_LOCK_INT_ID));
CREATE TABLE NEXT_LOCK_ID (NL_NEXT BIGINT NOT NULL);
INSERT INTO NEXT_LOCK_ID VALUES (1);
CREATE TABLE AUX_TABLE (MT_KEY1 VARCHAR(128) NOT NULL, MT_KEY2 BIGINT NOT NULL, MT_COMMENT VARCHAR(255),
  PRIMARY KEY (MT_KEY1, MT_KEY2));
"""


class MetastoreUnavailable(RuntimeError):
    """The metastore cannot run here; the message says why."""


@dataclass
class Metastore:
    uri: str
    warehouse: str
    workdir: Path
    proc: subprocess.Popen[bytes]

    def stop(self) -> None:
        self.proc.terminate()
        try:
            self.proc.wait(timeout=20)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()
        shutil.rmtree(self.workdir, ignore_errors=True)


def _jars() -> Path:
    try:
        import pyspark
    except ImportError:
        raise MetastoreUnavailable("pyspark is not installed: its jars hold the Hive metastore") from None
    jars = Path(pyspark.__file__).parent / "jars"
    if not any(jars.glob("hive-metastore-*.jar")):
        raise MetastoreUnavailable(f"no hive-metastore jar in {jars}")
    return jars


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port: int = s.getsockname()[1]
        return port


def start_metastore() -> Metastore:
    if shutil.which("java") is None:
        raise MetastoreUnavailable("no Java on PATH")
    try:
        import thrift  # noqa: F401 - pyiceberg's HiveCatalog speaks thrift
    except ImportError:
        raise MetastoreUnavailable("the thrift package is not installed (pip install 'compactor[iceberg]')") from None
    classpath = f"{_jars()}/*"
    work = Path(tempfile.mkdtemp(prefix="compactor-metastore-"))
    db, wh = work / "metastore_db", work / "warehouse"
    wh.mkdir()
    java = ["java", "-Xmx384m", "-cp", classpath, f"-Dderby.stream.error.file={work / 'derby.log'}",
            f"-Dhive.log.dir={work}", "-Dhive.log.file=metastore.log"]
    (work / "lock_tables.sql").write_text(f"CONNECT 'jdbc:derby:{db};create=true';\n{_LOCK_TABLES}")
    made = subprocess.run([*java, "org.apache.derby.tools.ij", str(work / "lock_tables.sql")], capture_output=True,
                          text=True, timeout=120)
    if made.returncode != 0 or "ERROR" in made.stdout:
        shutil.rmtree(work, ignore_errors=True)
        raise MetastoreUnavailable(f"Derby's ij could not create the lock tables: {made.stdout[-500:]}{made.stderr[-500:]}")
    port = _free_port()
    conf = {"hive.metastore.warehouse.dir": f"file://{wh}", "hive.async.log.enabled": "false",
            "javax.jdo.option.ConnectionURL": f"jdbc:derby:;databaseName={db};create=true",
            "datanucleus.schema.autoCreateAll": "true", "datanucleus.connectionPoolingType": "None",
            "hive.metastore.schema.verification": "false"}
    args = [a for k, v in conf.items() for a in ("--hiveconf", f"{k}={v}")]
    with (work / "server.log").open("wb") as log:
        proc = subprocess.Popen([*java, "org.apache.hadoop.hive.metastore.HiveMetaStore", "-p", str(port), *args],
                                stdout=log, stderr=subprocess.STDOUT)
    server = Metastore(f"thrift://127.0.0.1:{port}", f"file://{wh}", work, proc)
    deadline = time.monotonic() + READY_TIMEOUT_S
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            tail = (work / "server.log").read_text(errors="replace")[-800:]
            shutil.rmtree(work, ignore_errors=True)
            raise MetastoreUnavailable(f"the metastore exited ({proc.returncode}): {tail}")
        try:
            with socket.create_connection(("127.0.0.1", port), timeout=1):
                return server
        except OSError:
            time.sleep(0.5)
    server.stop()
    raise MetastoreUnavailable(f"the metastore did not answer on port {port} within {READY_TIMEOUT_S:.0f} s")
