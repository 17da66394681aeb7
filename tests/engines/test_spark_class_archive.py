"""The Spark driver's class archive (compactor/engines/spark_class_archive.py): noted on a first start,
made by the next (one maker at a time), taken in only once the JVM finished writing it, then used; a
damaged archive never stops a session; the user's own sharing options and the off switch are respected.

The file protocol is tested on files; the JDK's part (the header written last, the archive used, a
truncated archive crashing the JVM and the session starting anyway) with real driver JVMs in
subprocesses."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from compactor.engines import spark_class_archive as ca


@pytest.fixture
def cache(tmp_path: Path, monkeypatch) -> Path:
    monkeypatch.setenv("COMPACTOR_CACHE_DIR", str(tmp_path / "cache"))
    monkeypatch.delenv(ca.OFF_ENV, raising=False)
    monkeypatch.delenv("PYSPARK_SUBMIT_ARGS", raising=False)
    monkeypatch.delenv("SPARK_CONF_DIR", raising=False)
    return tmp_path / "cache" / "spark-classes"


def _finished(path: Path) -> None:
    path.write_bytes(ca.FINISHED_MAGIC + b"\0" * 64)


def test_a_first_start_only_notes_the_key_the_next_makes_one_and_others_wait(cache: Path) -> None:
    pytest.importorskip("pyspark")
    assert ca.for_session({}) == ca.NONE
    (seen,) = cache.glob("*.seen")
    making = ca.for_session({})
    assert making.claim is not None and "-XX:ArchiveClassesAtExit=" in making.options and ca.QUIET in making.options
    assert ca.for_session({}) == ca.NONE  # claimed: nobody else makes it, nobody waits
    ca.started(making, 2**22 + 17)  # a pid no process has
    assert json.loads(making.claim.read_text())["pid"] == 2**22 + 17
    part = Path(json.loads(making.claim.read_text())["part"])
    _finished(part)  # the JVM wrote its header (last)
    use = ca.for_session({})
    assert use.archive == cache / f"{seen.stem}-68.jsa" and use.archive.exists()
    assert use.options.startswith(f"-XX:SharedArchiveFile={use.archive} ")
    assert not part.exists() and not making.claim.exists()
    ca.failed(use)  # a start with it failed: it may be damaged
    assert not use.archive.exists()
    _finished(cache / f"{seen.stem}-68.jsa")
    with open(cache / f"{seen.stem}-68.jsa", "ab") as f:
        f.write(b"x")  # not the size it was written with
    assert ca.for_session({}).archive is None and not list(cache.glob("*.jsa"))


def test_an_unfinished_part_is_left_to_a_live_maker_and_deleted_once_it_is_gone(cache: Path) -> None:
    pytest.importorskip("pyspark")
    ca.for_session({})
    making = ca.for_session({})
    assert making.claim is not None
    part = Path(json.loads(making.claim.read_text())["part"])
    part.write_bytes(b"\0" * 128)  # being written: the header is still zeros
    ca.started(making, os.getpid())  # alive
    assert ca.for_session({}) == ca.NONE and part.exists() and making.claim.exists()
    ca.started(making, 2**22 + 17)  # gone, unfinished (killed while writing)
    assert ca.for_session({}).claim is not None  # deleted, and claimed again by this start
    assert not part.exists()


def test_the_newest_archives_are_kept(cache: Path) -> None:
    cache.mkdir(parents=True)
    for i in range(4):
        _finished(cache / f"k{i}.jsa")
        os.utime(cache / f"k{i}.jsa", (1_000_000 + i, 1_000_000 + i))
    ca._prune(cache)
    assert sorted(p.name for p in cache.glob("*.jsa")) == ["k2.jsa", "k3.jsa"]


@pytest.mark.parametrize("how", ["env", "xshare", "archive", "defaults", "submit_args"])
def test_sharing_stays_the_users_where_they_decide_it(cache: Path, tmp_path: Path, monkeypatch, how: str) -> None:
    pytest.importorskip("pyspark")
    conf: dict[str, str] = {}
    if how == "env":
        monkeypatch.setenv(ca.OFF_ENV, "0")
    elif how == "xshare":
        conf[ca.JAVA_OPTIONS] = "-Dx=1 -Xshare:off"
    elif how == "archive":
        conf[ca.JAVA_OPTIONS] = "-XX:SharedArchiveFile=/opt/mine.jsa"
    elif how == "defaults":  # spark-defaults.conf's value would be replaced by the session's
        (tmp_path / "conf").mkdir()
        (tmp_path / "conf" / "spark-defaults.conf").write_text(f"{ca.JAVA_OPTIONS} -Dproxy=1\n")
        monkeypatch.setenv("SPARK_CONF_DIR", str(tmp_path / "conf"))
    else:
        monkeypatch.setenv("PYSPARK_SUBMIT_ARGS", f"--conf {ca.JAVA_OPTIONS}=-Dx=1 pyspark-shell")
    for _ in range(3):
        assert ca.for_session(conf) == ca.NONE
    assert not cache.exists() or not list(cache.iterdir())
    assert ca.with_options(ca.ArchiveUse("-XX:SharedArchiveFile=a"), "-Xshare:off") == \
        "-XX:SharedArchiveFile=a -Xshare:off"  # the user's options come last: they win


def test_the_key_follows_the_class_path(cache: Path, tmp_path: Path) -> None:
    pytest.importorskip("pyspark")
    jar = tmp_path / "x.jar"
    jar.write_bytes(b"PK")
    key = ca.archive_key({"spark.jars": f"file:{jar}"})
    assert key == ca.archive_key({"spark.jars": f"file:{jar}"}) != ca.archive_key({})
    assert key != ca.archive_key({"spark.driver.extraClassPath": str(jar)})
    os.utime(jar, ns=(0, 0))
    assert ca.archive_key({"spark.jars": f"file:{jar}"}) != key
    # the JVM settings an archive must agree with are in the key; properties and logging are not
    plain = ca.archive_key({})
    assert ca.archive_key({ca.JAVA_OPTIONS: "-Dx=1 -Xlog:class+load=info"}) == plain
    assert ca.archive_key({ca.JAVA_OPTIONS: "-XX:+UseParallelGC"}) != plain
    assert ca.archive_key({"spark.driver.memory": "8g"}) != plain


# ----------------------------------------------------------------- real driver JVMs

SESSION = textwrap.dedent("""
    import json, os, signal, sys, time
    from compactor.formats.delta.spark import build_session
    out, options, kill = sys.argv[1], sys.argv[2], sys.argv[3] == "kill"
    conf = {"spark.ui.showConsoleProgress": "false"}
    if options:
        conf["spark.driver.extraJavaOptions"] = options
    spark = build_session("local[1]", "archive-test", conf, delta_jars=False)
    spark.range(0, 1000, numPartitions=2).selectExpr("id", "id * 2 AS v").write.parquet(out)
    rows = spark.read.parquet(out).selectExpr("sum(v) AS s", "count(*) AS n").collect()[0]
    gateway = spark.sparkContext._gateway
    proc = gateway.proc
    print(json.dumps({"sum": rows.s, "n": rows.n, "pid": proc.pid}), flush=True)
    if kill:  # let the JVM start writing the archive as it exits, and kill it mid-way
        from compactor.engines import spark_class_archive as ca
        part = json.load(open(os.path.join(str(ca.folder()), sys.argv[4])))["part"]
        spark.stop()
        gateway.shutdown()
        proc.stdin.close()
        deadline = time.time() + 120
        while time.time() < deadline and not (os.path.exists(part) and os.path.getsize(part) > 0):
            time.sleep(0.002)
        os.kill(proc.pid, signal.SIGKILL)
        proc.wait()
""")


REPO = Path(__file__).resolve().parents[2]


def _session(tmp_path: Path, cache_root: Path, name: str, options: str = "", kill: str = "",
             crash: bool = False) -> dict:
    env = {**os.environ, "COMPACTOR_CACHE_DIR": str(cache_root), "PYTHONPATH": str(REPO)}
    env.pop(ca.OFF_ENV, None)
    env.pop("PYSPARK_SUBMIT_ARGS", None)
    proc = subprocess.run([sys.executable, "-c", SESSION, str(tmp_path / name), options, "kill" if kill else "-",
                           kill], capture_output=True, text=True, env=env, timeout=300, cwd=str(tmp_path))
    assert proc.returncode == 0, proc.stderr[-3000:]
    lines = [ln for ln in proc.stdout.splitlines() if ln.startswith("{")]
    assert len(lines) == 1, proc.stdout
    if crash:  # the first JVM crashed (its summary on stdout, the JVM's own doing), the second ran
        assert "A fatal error has been detected" in proc.stdout and "without" in proc.stderr, proc.stderr[-2000:]
    else:  # the JVM printed nothing on stdout
        assert lines[0] == proc.stdout.strip(), proc.stdout
    result = json.loads(lines[0])
    assert (result["sum"], result["n"]) == (999_000, 1000)
    return result


def _needs_java() -> None:
    pytest.importorskip("pyspark.sql", reason="pyspark is part of the [spark] extra")
    if shutil.which("java") is None:
        pytest.skip("no Java on PATH (.ci/run installs openjdk-17-jre-headless)")


@pytest.mark.spark
def test_a_driver_makes_the_archive_as_it_exits_and_the_next_driver_loads_its_classes_from_it(
        tmp_path: Path, cache: Path) -> None:
    """Real drivers, their key seen: the first writes the archive as its JVM exits (the header last:
    finished), the next loads its classes from it (the JVM's own class-loading log says so) and gets the
    same rows. Then the archive, cut under a name that agrees, crashes the JVM: the session starts anyway,
    without it, and the damaged archive is gone."""
    _needs_java()
    root = cache.parent
    assert ca.for_session({}) == ca.NONE  # the key of the drivers below, seen (as a first driver notes it)
    (seen,) = cache.glob("*.seen")
    _session(tmp_path, root, "o2")  # capture_output: returns once the JVM exited (it wrote the archive)
    part = Path(json.loads((cache / f"{seen.stem}.making").read_text())["part"])
    assert part.read_bytes()[:4] == ca.FINISHED_MAGIC
    log = tmp_path / "classes.log"
    _session(tmp_path, root, "o3", options=f"-Xlog:class+load=info:file={log}")
    (archive,) = cache.glob(f"{seen.stem}-*.jsa")
    assert not part.exists()
    shared = sum(1 for ln in log.read_text().splitlines() if "source: shared objects file (top)" in ln)
    assert shared > 1000, f"{shared} classes from the archive"
    data = archive.read_bytes()
    archive.unlink()
    cut = cache / f"{seen.stem}-{len(data) // 3}.jsa"  # cut, but its name agrees: the JVM crashes mapping it
    cut.write_bytes(data[: len(data) // 3])
    _session(tmp_path, root, "o4", crash=True)
    assert not cut.exists()


@pytest.mark.spark
def test_a_jvm_killed_while_writing_leaves_a_part_that_is_never_taken_in(tmp_path: Path, cache: Path) -> None:
    """The JDK writes an archive's header last: a JVM killed while writing leaves zeros where the header
    goes. That part is not renamed into place; once its maker is gone it is deleted."""
    _needs_java()
    root = cache.parent
    assert ca.for_session({}) == ca.NONE
    (seen,) = cache.glob("*.seen")
    # the claim is made by the session below; its name is known beforehand
    _session(tmp_path, root, "o2", kill=f"{seen.stem}.making")
    claim = cache / f"{seen.stem}.making"
    part = Path(json.loads(claim.read_text())["part"])
    assert part.stat().st_size > 0 and part.read_bytes()[:4] != ca.FINISHED_MAGIC
    ca.settle(cache, seen.stem)
    assert not part.exists() and not claim.exists() and not (cache / f"{seen.stem}.jsa").exists()
