"""Object-store emulators on loopback for the tests: moto's S3 server and Azurite's blob service.

Each server runs as a child process on a free 127.0.0.1 port with its own data folder, is polled until it
answers, gets one bucket/container, and is stopped (terminate, then kill) by ``stop()``. A server whose
package is missing is installed into the environment (moto, with pip) or into the project-local
``.cache/azurite`` (Azurite, with npm); when that is impossible, ``EmulatorUnavailable`` carries the exact
reason so the fixtures can skip saying it. ``scripts/install-emulators`` installs both ahead of time.

Why moto for S3 (measured, docs/notes/object-stores.md): it honours ``If-None-Match: *`` and ``If-Match``
on PutObject (412 PreconditionFailed), which delta-rs commits and the lease need, and exactly one of 8
racing conditional writers won in every trial; it installs from PyPI in seconds and starts in about 1 s.
s3s-fs (crates.io) also answers 412 but lets racing writers all win, so delta-rs commits overwrite each
other there.
"""

from __future__ import annotations

import os
import shutil
import socket
import subprocess
import sys
import tempfile
import time
import urllib.error
import urllib.request
from dataclasses import dataclass, field
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
CACHE = Path(os.environ.get("COMPACTOR_EMULATOR_CACHE", REPO / ".cache"))
AZURITE_DIR = CACHE / "azurite"
AZURITE_SPEC = "azurite@3"
MOTO_SPEC = "moto[server]>=5.1"

#: Azurite's well-known development account (public, documented by Microsoft for the emulator only)
AZURITE_ACCOUNT = "devstoreaccount1"
AZURITE_KEY = "Eby8vdM02xNOcqFlqUwJPLlmEtlCDXJ1OUzFT50uSRZ6IFsuFq2UVErCz4I6tq/K1SZFPTOtr/KBHBeksoGMGw=="
#: moto accepts any credentials; these are not secrets
S3_KEY_ID = "compactor-test"
S3_SECRET = "compactor-test-secret"

READY_TIMEOUT_S = 60.0


class EmulatorUnavailable(RuntimeError):
    """The emulator cannot be installed or started here; the message says exactly why."""


def free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@dataclass
class ObjectStoreServer:
    """A running emulator: where it listens, its bucket/container, and the options clients need."""

    kind: str  # "s3" | "azure"
    endpoint: str
    bucket: str
    #: ``s3://bucket`` or ``az://container``: prefix of every table URI on this server
    root_uri: str
    #: the storage_options dict delta-rs and compactor take (the same keys for both)
    storage_options: dict[str, str]
    #: environment variables a client process needs besides storage_options (Azurite on a non-default port)
    env: dict[str, str] = field(default_factory=dict)
    proc: subprocess.Popen | None = None
    workdir: Path | None = None
    log_path: Path | None = None
    started_in_s: float = 0.0

    def uri(self, *parts: str) -> str:
        return "/".join([self.root_uri, *(p.strip("/") for p in parts if p)])

    def log_tail(self, n: int = 20) -> str:
        if self.log_path is None or not self.log_path.exists():
            return ""
        return "\n".join(self.log_path.read_text(errors="replace").splitlines()[-n:])

    def stop(self) -> None:
        if self.proc is not None and self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(timeout=10)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait(timeout=10)
        self.proc = None
        if self.workdir is not None:
            shutil.rmtree(self.workdir, ignore_errors=True)
            self.workdir = None


def _wait_http(url: str, proc: subprocess.Popen, log_path: Path, timeout: float = READY_TIMEOUT_S) -> None:
    """Until ``url`` answers any HTTP status (an auth error is an answer) or the process exits."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            raise EmulatorUnavailable(f"emulator exited with code {proc.returncode} before it was ready: "
                                      f"{log_path.read_text(errors='replace')[-1500:]}")
        try:
            urllib.request.urlopen(url, timeout=2).close()
            return
        except urllib.error.HTTPError:
            return
        except (urllib.error.URLError, ConnectionError, TimeoutError, OSError):
            time.sleep(0.1)
    proc.kill()
    raise EmulatorUnavailable(f"emulator not ready at {url} after {timeout:.0f} s: "
                              f"{log_path.read_text(errors='replace')[-1500:]}")


def _popen(cmd: list[str], log_path: Path, env: dict[str, str] | None = None) -> subprocess.Popen:
    log = open(log_path, "wb")
    try:
        return subprocess.Popen(cmd, stdout=log, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
                                env={**os.environ, **(env or {})}, start_new_session=True)
    finally:
        log.close()


# ---------------------------------------------------------------- S3 (moto server)

def ensure_moto(install: bool = True) -> None:
    try:
        import boto3  # noqa: F401
        import moto.server  # noqa: F401
        return
    except ImportError as e:
        missing = str(e)
    if not install:
        raise EmulatorUnavailable(f"moto server is not installed ({missing}); run scripts/install-emulators")
    r = subprocess.run([sys.executable, "-m", "pip", "install", "-q", MOTO_SPEC], capture_output=True, text=True)
    if r.returncode != 0:
        raise EmulatorUnavailable(f"moto server is not installed ({missing}) and `pip install {MOTO_SPEC}` "
                                  f"failed: {(r.stderr or r.stdout).strip()[-800:]}")
    import importlib
    importlib.invalidate_caches()


def start_s3(bucket: str = "compactor-test") -> ObjectStoreServer:
    ensure_moto()
    import boto3

    t0 = time.perf_counter()
    workdir = Path(tempfile.mkdtemp(prefix="compactor-moto-"))
    port = free_port()
    endpoint = f"http://127.0.0.1:{port}"
    log_path = workdir / "moto.log"
    # moto.server with key writes serialised (moto_server.py says why)
    proc = _popen([sys.executable, str(Path(__file__).with_name("moto_server.py")), "-H", "127.0.0.1", "-p", str(port)],
                  log_path)
    server = ObjectStoreServer(
        kind="s3", endpoint=endpoint, bucket=bucket, root_uri=f"s3://{bucket}",
        storage_options={
            "AWS_ENDPOINT_URL": endpoint,
            "AWS_ALLOW_HTTP": "true",
            "AWS_ACCESS_KEY_ID": S3_KEY_ID,
            "AWS_SECRET_ACCESS_KEY": S3_SECRET,
            "AWS_REGION": "us-east-1",
            # object_store: conditional replace (If-Match) for renewals/takeovers; create-if-absent
            # (If-None-Match: *) is used for commits with or without it
            "aws_conditional_put": "etag",
        },
        # no client library may ask the cloud metadata service for credentials or a region
        env={"AWS_EC2_METADATA_DISABLED": "true"},
        proc=proc, workdir=workdir, log_path=log_path)
    try:
        _wait_http(f"{endpoint}/", proc, log_path)
        boto3.client("s3", endpoint_url=endpoint, aws_access_key_id=S3_KEY_ID, aws_secret_access_key=S3_SECRET,
                     region_name="us-east-1").create_bucket(Bucket=bucket)
    except BaseException:
        server.stop()
        raise
    server.started_in_s = time.perf_counter() - t0
    return server


# ---------------------------------------------------------------- Azure (Azurite blob service)

def azurite_bin() -> Path:
    return AZURITE_DIR / "node_modules" / ".bin" / "azurite-blob"


def ensure_azurite(install: bool = True) -> Path:
    exe = azurite_bin()
    if exe.exists():
        return exe
    if not install:
        raise EmulatorUnavailable(f"Azurite is not installed at {exe}; run scripts/install-emulators")
    npm = shutil.which("npm")
    if npm is None or shutil.which("node") is None:
        raise EmulatorUnavailable(f"Azurite is not installed at {exe} and npm/node are not on PATH to install it")
    AZURITE_DIR.mkdir(parents=True, exist_ok=True)
    ignore = CACHE / ".gitignore"  # keeps the cache out of git without touching the repository's .gitignore
    if not ignore.exists():
        ignore.write_text("*\n")
    r = subprocess.run([npm, "install", "--prefix", str(AZURITE_DIR), AZURITE_SPEC, "--no-audit", "--no-fund",
                        "--loglevel=error"], capture_output=True, text=True)
    if r.returncode != 0 or not exe.exists():
        raise EmulatorUnavailable(f"Azurite is not installed at {exe} and `npm install --prefix {AZURITE_DIR} "
                                  f"{AZURITE_SPEC}` failed: {(r.stderr or r.stdout).strip()[-800:]}")
    return exe


def _azure_create_container(endpoint: str, container: str) -> None:
    try:
        from azure.storage.blob import BlobServiceClient
    except ImportError as e:
        raise EmulatorUnavailable(f"azure-storage-blob is needed to create the Azurite container ({e})") from e
    client = BlobServiceClient(f"{endpoint}/{AZURITE_ACCOUNT}",
                               credential={"account_name": AZURITE_ACCOUNT, "account_key": AZURITE_KEY})
    client.create_container(container)


def start_azurite(container: str = "compactor-test") -> ObjectStoreServer:
    exe = ensure_azurite()
    t0 = time.perf_counter()
    workdir = Path(tempfile.mkdtemp(prefix="compactor-azurite-"))
    port = free_port()
    endpoint = f"http://127.0.0.1:{port}"
    log_path = workdir / "azurite.log"
    # --disableTelemetry: Azurite otherwise sends usage data to a cloud endpoint; tests talk to loopback only
    proc = _popen([str(exe), "--blobHost", "127.0.0.1", "--blobPort", str(port), "--location", str(workdir / "data"),
                   "--skipApiVersionCheck", "--loose", "--disableTelemetry"], log_path)
    server = ObjectStoreServer(
        kind="azure", endpoint=endpoint, bucket=container, root_uri=f"az://{container}",
        storage_options={
            "AZURE_STORAGE_ACCOUNT_NAME": AZURITE_ACCOUNT,
            "AZURE_STORAGE_ACCOUNT_KEY": AZURITE_KEY,
            "AZURE_STORAGE_USE_EMULATOR": "true",
            "AZURE_ALLOW_HTTP": "true",
        },
        # the emulator flag means port 10000 unless this is set; delta-rs 1.6.6 needs the emulator flag
        # (with AZURE_ENDPOINT instead, its third commit fails "Invalid table version: 1")
        env={"AZURITE_BLOB_STORAGE_URL": endpoint},
        proc=proc, workdir=workdir, log_path=log_path)
    try:
        _wait_http(f"{endpoint}/{AZURITE_ACCOUNT}?comp=list", proc, log_path)
        _azure_create_container(endpoint, container)
    except BaseException:
        server.stop()
        raise
    server.started_in_s = time.perf_counter() - t0
    return server


STARTERS = {"s3": start_s3, "azure": start_azurite}


def install_all() -> None:
    """Install both emulators (``python -m tests.objectstore.servers install``)."""
    ensure_moto()
    print(f"moto server: ok ({MOTO_SPEC})")
    print(f"azurite: ok ({ensure_azurite()})")


if __name__ == "__main__":
    if sys.argv[1:] == ["install"]:
        install_all()
    else:
        # smoke test: start both, print their connection info, stop them
        for name, start in STARTERS.items():
            s = start()
            print(f"{name}: {s.endpoint} {s.root_uri} ready in {s.started_in_s:.1f} s")
            s.stop()
