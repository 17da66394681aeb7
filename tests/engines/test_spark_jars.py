"""A Spark session's resolved Delta jars are remembered (compactor/engines/spark_jars.py): the next
session with the same packages and settings is given their paths instead of resolving them with Ivy
again, and still runs Delta SQL; a jar that changed or went missing, or other settings, resolve again."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from compactor.engines import spark_jars


@pytest.fixture
def cache(tmp_path: Path, monkeypatch) -> Path:
    monkeypatch.setenv("COMPACTOR_CACHE_DIR", str(tmp_path / "cache"))
    return tmp_path / "cache"


def _jars(tmp_path: Path, n: int = 2) -> list[Path]:
    out = []
    for i in range(n):
        jar = tmp_path / "ivy" / f"j{i}.jar"
        jar.parent.mkdir(exist_ok=True)
        jar.write_bytes(b"PK" * (i + 1))
        out.append(jar)
    return out


def test_remembered_jars_are_given_while_every_one_is_unchanged(tmp_path: Path, cache: Path) -> None:
    pytest.importorskip("pyspark")
    jars = _jars(tmp_path)
    key = spark_jars.resolution_key("io.delta:delta-spark_4.2_2.13:4.4.0", {})
    assert spark_jars.resolved_jars(key) is None
    uris = ",".join(f"file://{j}" for j in jars)
    spark_jars.remember(key, uris)
    assert spark_jars.resolved_jars(key) == uris
    # other settings are another resolution
    assert spark_jars.resolved_jars(spark_jars.resolution_key("io.delta:delta-spark_4.2_2.13:4.4.0",
                                                              {"spark.jars.repositories": "https://r"})) is None
    assert spark_jars.resolved_jars(spark_jars.resolution_key("io.delta:delta-spark_4.2_2.13:4.3.0", {})) is None
    os.utime(jars[1], ns=(0, 0))  # touched: resolve again
    assert spark_jars.resolved_jars(key) is None
    spark_jars.remember(key, uris)
    jars[0].unlink()  # gone: resolve again
    assert spark_jars.resolved_jars(key) is None


def test_nothing_is_remembered_of_jars_that_are_not_local_files_nor_from_a_damaged_cache(
        tmp_path: Path, cache: Path) -> None:
    pytest.importorskip("pyspark")
    (jar,) = _jars(tmp_path, 1)
    key = spark_jars.resolution_key("a:b:1", {})
    spark_jars.remember(key, f"file://{jar},hdfs://nn/lib/x.jar")
    assert spark_jars.resolved_jars(key) is None
    spark_jars.remember(key, f"file://{jar}")
    (cache / "spark-jars.json").write_text("{not json")
    assert spark_jars.resolved_jars(key) is None
    spark_jars.remember(key, f"file://{jar}")  # a damaged cache is replaced
    assert spark_jars.resolved_jars(key) == f"file://{jar}"


SESSION = """
import json, sys
from compactor.formats.delta.spark import build_session, delta_sql_enabled
spark = build_session("local[1]", "jars", {"spark.ui.showConsoleProgress": "false"}, delta_jars=True)
conf = spark.sparkContext.getConf()
spark.range(3).write.format("delta").save(sys.argv[1])
rows = spark.read.format("delta").load(sys.argv[1]).count()
print(json.dumps({"packages": conf.get("spark.jars.packages", None), "jars": conf.get("spark.jars", ""),
                  "delta": delta_sql_enabled(spark), "rows": rows}))
spark.stop()
"""


@pytest.mark.spark
def test_the_second_session_loads_the_remembered_jars_and_runs_delta(tmp_path: Path) -> None:
    pytest.importorskip("delta", reason="delta-spark is part of the [spark] extra")
    if shutil.which("java") is None:
        pytest.skip("no Java on PATH (.ci/run installs openjdk-17-jre-headless)")
    env = {**os.environ, "COMPACTOR_CACHE_DIR": str(tmp_path / "cache")}
    runs = []
    for i in range(2):
        r = subprocess.run([sys.executable, "-c", SESSION, str(tmp_path / f"t{i}")], capture_output=True,
                           text=True, env=env, timeout=600)
        if r.returncode != 0 and i == 0 and "could not be loaded" in r.stderr:
            pytest.skip("the Delta Lake jars could not be resolved on this machine (no Maven Central)")
        assert r.returncode == 0, r.stderr[-3000:]
        runs.append(json.loads(r.stdout.strip().splitlines()[-1]))
    first, second = runs
    assert first["packages"] and first["delta"] and first["rows"] == 3
    assert second["packages"] is None, "the second session resolved the packages again"
    assert second["jars"] == first["jars"] and "delta-spark" in second["jars"]
    assert second["delta"] and second["rows"] == 3


def test_forget_drops_a_resolution(tmp_path: Path, cache: Path) -> None:
    pytest.importorskip("pyspark")
    (jar,) = _jars(tmp_path, 1)
    spark_jars.remember("a", f"file://{jar}")
    spark_jars.remember("b", f"file://{jar}")
    spark_jars.forget("a")
    assert spark_jars.resolved_jars("a") is None and spark_jars.resolved_jars("b") == f"file://{jar}"


REUSED = """
import sys
from compactor.formats.delta.spark import build_session
first = build_session("local[1]", "first", {"spark.ui.showConsoleProgress": "false"}, delta_jars=True)
again = build_session("local[1]", "again", {"spark.ui.showConsoleProgress": "false"}, delta_jars=False,
                      packages=["org.example:nothing:1.0"])
assert again.sparkContext is first.sparkContext and "delta-spark" in first.sparkContext.getConf().get("spark.jars")
first.stop()
"""

BROKEN = """
import json, sys
from compactor.formats.delta.spark import build_session, delta_sql_enabled
spark = build_session("local[1]", "broken", {"spark.ui.showConsoleProgress": "false"}, delta_jars="auto")
print(json.dumps({"delta": delta_sql_enabled(spark)}))
spark.stop()
"""


def _spark_available() -> None:
    pytest.importorskip("delta", reason="delta-spark is part of the [spark] extra")
    if shutil.which("java") is None:
        pytest.skip("no Java on PATH (.ci/run installs openjdk-17-jre-headless)")


@pytest.mark.spark
def test_a_session_this_process_already_had_is_not_remembered_for_other_packages(tmp_path: Path) -> None:
    """getOrCreate hands back the context a process already has, whatever packages were asked for: its jars
    (here the Delta jars) are not the asked packages' and are not kept for them."""
    _spark_available()
    env = {**os.environ, "COMPACTOR_CACHE_DIR": str(tmp_path / "cache")}
    r = subprocess.run([sys.executable, "-c", REUSED], capture_output=True, text=True, env=env, timeout=600)
    if r.returncode != 0 and "could not be loaded" in r.stderr:
        pytest.skip("the Delta Lake jars could not be resolved on this machine (no Maven Central)")
    assert r.returncode == 0, r.stderr[-3000:]
    kept = json.loads((tmp_path / "cache" / "spark-jars.json").read_text())
    assert kept and not [k for k in kept if "org.example" in k], kept


@pytest.mark.spark
def test_remembered_jars_that_do_not_load_delta_are_forgotten(tmp_path: Path, cache: Path) -> None:
    """A remembered jar that no longer holds Delta (rewritten in place with its size and time kept) starts a
    session without Delta, as a failed resolution does under ``delta_jars: auto``, and is forgotten."""
    _spark_available()
    from compactor.formats.delta.spark import _delta_pip_settings

    settings = _delta_pip_settings(())
    if settings is None:
        pytest.skip("this pyspark's builder does not show its settings: jars are resolved at every start")
    jar = tmp_path / "not-delta.jar"
    jar.write_bytes(b"not a jar")
    key = spark_jars.resolution_key(settings["spark.jars.packages"], {})
    spark_jars.remember(key, f"file://{jar}")
    assert spark_jars.resolved_jars(key) == f"file://{jar}"
    r = subprocess.run([sys.executable, "-c", BROKEN], capture_output=True, text=True, env=dict(os.environ),
                       timeout=600)
    assert r.returncode == 0, r.stderr[-3000:]
    assert json.loads(r.stdout.strip().splitlines()[-1]) == {"delta": False}
    assert spark_jars.resolved_jars(key) is None
