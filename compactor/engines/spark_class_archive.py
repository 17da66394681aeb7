"""The Spark driver's classes from a class-data-sharing archive (the JDK's CDS, JEP 350), made on this
machine once the cache folder has been seen to outlive a run.

A driver JVM loads and verifies about 11,000 classes from Spark's jars and a table format's at every start.
From an archive of them, a session with a table format's jars starts in about 3.7 s
instead of 5.5 s, and the first group job, cold, takes about 0.7 s less (docs/benchmarks.md). Only a JVM this process launches gets one (a
local or client-mode driver; nothing over Spark Connect, nothing for a context that already runs).

How an archive comes to be, so that a run that could never use one pays nothing:
- a start that finds no archive for its key (below) only notes that it saw the key (``<key>.seen``);
- a start that finds that note (the cache folder outlived a run: an ephemeral container never gets here)
  makes one, unless another process is making it (``<key>.making``, created exclusively, names the file
  being made and the JVM, as runtime/liveness.py names a process): its driver runs with ``-XX:ArchiveClassesAtExit=<key>.<pid>.part`` and
  writes the classes it loaded as it exits, after compactor is done (about 10 s; that run itself is about
  10 s slower, measured in docs/benchmarks.md);
- a later start renames a finished ``.part`` to ``<key>-<its size>.jsa``: finished means its header is there, which
  the JDK writes last (a JVM killed while writing leaves zeros there: tests/engines/
  test_spark_class_archive.py). One whose maker is provably gone unfinished (or whose claim is an hour
  old) is deleted and made again later;
- a start with an archive passes ``-XX:SharedArchiveFile``. The JVM checks it against its own build and
  the class path's jars, and a class of any other loader against its class file; on a mismatch classes
  load as usual. A cut archive crashes the JVM as it maps it (a truncated copy did): one whose size is not
  the one in its name is deleted, and a session that fails to start with one all the same deletes it and
  starts again without (spark_session.py; the JVM's crash summary goes to stdout then).

The key: the java binary and the pyspark installation (paths, sizes, modification times), the
``spark.jars`` and ``spark.driver.extraClassPath`` of the session (each local jar's size and modification
time), and what of the JVM's settings an archive must agree with: the driver's memory and the user's
``-XX:`` and ``-Xm`` options (the garbage collector, compressed pointers, the heap); not ``-D`` or
``-Xlog`` options. The JVM's CDS messages are turned off (``-Xlog:cds*=off``) and the VM's own output goes to stderr
(``-XX:+DisplayVMOutputToStderr``): it would print them on stdout. A crash's summary still goes to stdout.

Off: ``COMPACTOR_SPARK_CLASS_ARCHIVE=0``, or any ``-Xshare`` or archive option in the session's
``spark.driver.extraJavaOptions`` (nothing is added then; the user's options always come after ours), or
``spark.driver.extraJavaOptions`` set where compactor does not see it (spark-defaults.conf,
``PYSPARK_SUBMIT_ARGS``), which the session's own value would replace. At most KEEP archives are kept
(about 165 MB each)."""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
import shutil
import time
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path

from compactor.engines.spark_jars import local_stat
from compactor.runtime.atomic_file import replace_with
from compactor.runtime.liveness import identity_of, provably_dead
from compactor.runtime.user_cache import cache_dir

OFF_ENV = "COMPACTOR_SPARK_CLASS_ARCHIVE"
JAVA_OPTIONS = "spark.driver.extraJavaOptions"
#: the first bytes of a finished dynamic archive (the JDK's dynamic-archive magic, 0xf00baba8, little-endian)
FINISHED_MAGIC = bytes.fromhex("a8ab0bf0")
#: the JVM's own messages about archives, off, and the VM's other output on stderr (not a crash's summary:
#: the JVM prints that on stdout regardless): stdout may be a plan or JSON
QUIET = "-Xlog:cds*=off -Xlog:class+path*=off -XX:+DisplayVMOutputToStderr"
#: options of the user's that decide sharing themselves: then compactor adds nothing
USER_SHARING = ("-Xshare", "SharedArchiveFile", "ArchiveClassesAtExit", "DumpLoadedClassList", "SharedClassListFile")
#: archives kept (the newest)
KEEP = 2
#: a claim older than this is taken to be stale, its maker's end unprovable (another PID namespace, no
#: /proc) or never reached
CLAIM_STALE_S = 3600.0


@dataclass(frozen=True)
class ArchiveUse:
    """What a session start adds: JVM options (empty: none), the archive they use (deleted if the start
    fails) or the claim of the archive they make (given the JVM's pid once it runs)."""

    options: str = ""
    archive: Path | None = None
    claim: Path | None = None


NONE = ArchiveUse()


def folder() -> Path:
    return cache_dir() / "spark-classes"


def _java() -> str | None:
    home = os.environ.get("JAVA_HOME")
    java = os.path.join(home, "bin", "java") if home else shutil.which("java")
    return os.path.realpath(java) if java else None


def archive_key(conf: Mapping[str, str]) -> str:
    """What an archive depends on, hashed: the JVM, pyspark's jars and the session's own class path."""
    import pyspark

    jars_dir = os.path.join(os.path.dirname(os.path.abspath(pyspark.__file__)), "jars")
    java = _java()
    parts: list[object] = [java, local_stat(java) if java else None, pyspark.__version__, jars_dir,
                           local_stat(jars_dir), os.environ.get("SPARK_HOME"), os.environ.get("SPARK_DIST_CLASSPATH")]
    flags = [o for o in (conf.get(JAVA_OPTIONS) or "").split() if o.startswith(("-XX:", "-Xm"))]
    parts += [conf.get("spark.driver.memory"), flags]
    for k in ("spark.jars", "spark.driver.extraClassPath"):
        value = conf.get(k) or ""
        parts.append([[j.strip(), local_stat(j.strip())] for j in value.replace(os.pathsep, ",").split(",")
                      if j.strip()])
    return hashlib.sha256(json.dumps(parts, default=str).encode()).hexdigest()[:24]


def _set_elsewhere() -> bool:
    """Whether the driver's Java options may be set where the session's own value would replace them."""
    if JAVA_OPTIONS in os.environ.get("PYSPARK_SUBMIT_ARGS", ""):
        return True
    dirs = [os.environ.get("SPARK_CONF_DIR")]
    if os.environ.get("SPARK_HOME"):
        dirs.append(os.path.join(os.environ["SPARK_HOME"], "conf"))
    for d in filter(None, dirs):
        try:
            with open(os.path.join(d, "spark-defaults.conf"), encoding="utf-8", errors="replace") as f:
                if JAVA_OPTIONS in f.read():
                    return True
        except OSError:
            continue
    return False


def wanted(conf: Mapping[str, str]) -> bool:
    """Whether a session with ``conf`` may get an archive at all."""
    if os.environ.get(OFF_ENV, "1").strip().lower() in ("0", "false", "off", "no"):
        return False
    if any(s in (conf.get(JAVA_OPTIONS) or "") for s in USER_SHARING):
        return False
    return not _set_elsewhere()


def _quoted(path: Path) -> str | None:
    text = str(path)
    if '"' in text or "'" in text:
        return None
    return f'"{text}"' if any(c.isspace() for c in text) else text


def _finished(part: Path) -> bool:
    try:
        with open(part, "rb") as f:
            return f.read(len(FINISHED_MAGIC)) == FINISHED_MAGIC
    except OSError:
        return False


def _read_claim(claim: Path) -> dict[str, object] | None:
    try:
        data = json.loads(claim.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None
    return data if isinstance(data, dict) else None


def _unlink(*paths: Path | None) -> None:
    for p in paths:
        if p is not None:
            with contextlib.suppress(OSError):
                p.unlink()


def settle(where: Path, key: str) -> None:
    """Take in what an earlier maker of ``key`` left: a finished part becomes the archive; an unfinished
    one whose maker is gone is deleted (with its claim, so a later start makes it again)."""
    claim = where / f"{key}.making"
    data = _read_claim(claim)
    if data is None:
        if claim.exists() and time.time() - claim.stat().st_mtime > CLAIM_STALE_S:
            _unlink(claim)  # never filled in (its maker died before its JVM ran)
        return
    part = Path(str(data.get("part", "")))
    if part.parent != where:
        _unlink(claim)
        return
    if _finished(part):
        try:
            os.replace(part, where / f"{key}-{part.stat().st_size}.jsa")
        except OSError:
            return
        _unlink(claim)
        _prune(where)
        return
    started = data.get("at")
    stale = not isinstance(started, (int, float)) or time.time() - started > CLAIM_STALE_S
    maker = data.get("maker")
    if not stale and not (isinstance(maker, str) and provably_dead(maker)):
        return  # its JVM is starting, still running, writing it now, or in a place this process cannot see
    _unlink(part, claim)


def _archive(where: Path, key: str) -> Path | None:
    """The archive of ``key``, if it still has the size it was written with (its name says it): a cut one
    would crash the JVM as it maps it, so it is deleted instead."""
    for path in where.glob(f"{key}-*.jsa"):
        try:
            intact = path.stat().st_size == int(path.stem.rsplit("-", 1)[1])
        except (OSError, ValueError):
            intact = False
        if intact:
            return path
        _unlink(path)
    return None


def _prune(where: Path) -> None:
    archives = sorted(where.glob("*.jsa"), key=lambda p: p.stat().st_mtime, reverse=True)
    for old in archives[KEEP:]:
        _unlink(old)


def for_session(conf: Mapping[str, str]) -> ArchiveUse:
    """The archive options of a new driver JVM with ``conf`` (see the module's docstring)."""
    if not wanted(conf):
        return NONE
    try:
        where = folder()
        where.mkdir(parents=True, exist_ok=True)
        key = archive_key(conf)
        settle(where, key)
        archive = _archive(where, key)
        if archive is not None:
            q = _quoted(archive)
            return ArchiveUse(f"-XX:SharedArchiveFile={q} {QUIET}", archive=archive) if q else NONE
        seen = where / f"{key}.seen"
        if not seen.exists():
            seen.touch()
            return NONE
        claim = where / f"{key}.making"
        part = where / f"{key}.{os.getpid()}.part"
        q = _quoted(part)
        if q is None:
            return NONE
        try:
            fd = os.open(claim, os.O_CREAT | os.O_EXCL | os.O_WRONLY, 0o644)
        except FileExistsError:
            return NONE  # another process makes it
        with os.fdopen(fd, "w", encoding="utf-8") as f:
            json.dump({"part": str(part), "pid": None, "at": time.time()}, f)
        _unlink(part)
        return ArchiveUse(f"-XX:ArchiveClassesAtExit={q} {QUIET}", claim=claim)
    except OSError:  # the cache folder cannot be written: no archive, nothing else changes
        return NONE


def started(use: ArchiveUse, jvm_pid: int | None) -> None:
    """The session started: a claim gets the pid of the JVM that makes the archive (its exit ends it)."""
    if use.claim is None:
        return
    data = _read_claim(use.claim)
    if data is None:
        return
    data["pid"] = jvm_pid
    data["maker"] = identity_of(jvm_pid) if jvm_pid is not None else None
    try:
        replace_with(use.claim, json.dumps(data))
    except OSError:
        pass


def failed(use: ArchiveUse) -> None:
    """The session did not start with ``use``: its archive is deleted (it may be damaged), its claim and
    part too."""
    if use.claim is not None:
        data = _read_claim(use.claim) or {}
        _unlink(Path(str(data["part"])) if data.get("part") else None, use.claim)
    _unlink(use.archive)


def with_options(use: ArchiveUse, user_options: str | None) -> str:
    """The driver's Java options: ours first, the user's after (a later JVM option wins)."""
    return " ".join(filter(None, (use.options, (user_options or "").strip())))
