"""compactor's Iceberg apply on the spark engine against a hand-run ``rewrite_data_files``, whole process
each (issue 39's goal: <= 0.8x), on a Spark-written table of 200 partitions x 10 small files in a JDBC
catalog on sqlite, local[2]. Each run starts from the same table: the catalog and the warehouse are put
back from a pristine copy first (in both commands, so both pay it).

    python bench/iceberg_compare.py setup /tmp/icebench           # the table, the project, its plan
    /usr/bin/time -v python bench/iceberg_compare.py native /tmp/icebench      # then, in turn, pair by pair:
    /usr/bin/time -v python bench/iceberg_compare.py compactor /tmp/icebench
    /usr/bin/time -v python bench/iceberg_compare.py local /tmp/icebench

``native``: one process starts Spark with Iceberg's runtime and the sqlite driver only (no Delta jars, no
AWS bundle: what a hand-run job loads) and CALLs ``system.rewrite_data_files`` on the table (its defaults: every partition's 10 files into one). ``compactor``: ``compactor apply`` of the plan
made at setup (the same files, one output per partition), in a process of its own as a deploy pipeline
runs it; ``local``: the same on the embedded default engine (no JVM: the table is v2, Parquet, no deletes,
so the local engine commits it exactly). Each checks the rows afterwards (native: a count; compactor: its own verification before the commit)."""

from __future__ import annotations

import shutil
import subprocess
import sys
import time
from pathlib import Path

PARTITIONS, FILES = 200, 10
CATALOG = "bench"


def _session(root: Path, *, bare: bool = False):  # noqa: ANN202 - pyspark is optional for the package
    """The tests' session (Delta's and Iceberg's jars), or with ``bare`` what a hand-run ``rewrite_data_files``
    needs and no more: Iceberg's Spark runtime and the sqlite JDBC driver, through Ivy as the tests get them."""
    sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
    from tests.iceberg.spark_tables import JdbcCatalog, build_session

    cat = JdbcCatalog(CATALOG, root / "ice")
    conf = {"spark.ui.enabled": "false", **{k: v for k, v in cat.spark_conf().items()}}
    if not bare:
        return build_session("local[2]", "iceberg-bench", conf), cat
    from pyspark.sql import SparkSession

    from compactor.formats.iceberg.spark import ICEBERG_EXTENSION, SQLITE_JDBC, runtime_package

    builder = SparkSession.builder.master("local[2]").appName("iceberg-bench")
    for k, v in {**conf, "spark.jars.packages": f"{runtime_package()},{SQLITE_JDBC}",
                 "spark.sql.extensions": ICEBERG_EXTENSION}.items():
        builder = builder.config(k, v)
    return builder.getOrCreate(), cat


def _restore(root: Path) -> None:
    for live, pristine in ((root / "ice", root / "pristine"), (root / "proj", root / "pristine-proj"),
                           (root / "proj-local", root / "pristine-proj-local")):
        shutil.rmtree(live, ignore_errors=True)
        shutil.copytree(pristine, live)


def setup(root: Path) -> None:
    shutil.rmtree(root, ignore_errors=True)
    (root / "ice" / "warehouse").mkdir(parents=True)
    spark, cat = _session(root)
    spark.sql(f"CREATE NAMESPACE IF NOT EXISTS {CATALOG}.db")
    t = f"{CATALOG}.db.t"
    spark.sql(f"""CREATE TABLE {t} (id BIGINT, p INT, s STRING, v DOUBLE) USING iceberg PARTITIONED BY (p)
                  TBLPROPERTIES ('format-version' = '2')""")
    rows = 200_000
    for i in range(FILES):
        spark.sql(f"""INSERT INTO {t} SELECT id, CAST(id % {PARTITIONS} AS INT), concat('s', CAST(id AS STRING)),
                      id * 0.5 FROM range({i * rows}, {(i + 1) * rows}) DISTRIBUTE BY CAST(id % {PARTITIONS} AS INT)""")
    files = spark.sql(f"SELECT count(*) FROM {t}.files").collect()[0][0]
    spark.stop()
    for proj, engine in ((root / "proj", "spark"), (root / "proj-local", "local")):
        _project(proj, cat.uri, cat.warehouse, engine)
    shutil.copytree(root / "ice", root / "pristine")
    print(f"{files} data files in {PARTITIONS} partitions; plan at {proj / 'target' / 'plan.json'}")


def _project(proj: Path, uri: str, warehouse: str, engine: str) -> None:
    """A project applying the table's plan with ``engine`` (its plan made now, kept pristine beside it)."""
    (proj / "policies").mkdir(parents=True)
    (proj / "compactor.yml").write_text("name: icebench\n")
    spark = "      spark: {master: 'local[2]'}\n" if engine == "spark" else ""
    (proj / "profiles.yml").write_text(
        f"default:\n  target: dev\n  outputs:\n    dev:\n      engine: {engine}\n{spark}"
        f"      catalogs:\n        {CATALOG}: {{type: sql, uri: \"{uri}\", warehouse: \"{warehouse}\"}}\n")
    (proj / "policies" / "t.yml").write_text(
        f"version: 1\ntables:\n  - name: t\n    format: iceberg\n    catalog: {{name: {CATALOG}, namespace: db, table: t}}\n"
        "    compaction: {target_file_size: 512MiB, triggers: {min_input_files: 2}}\n")
    subprocess.run([sys.executable, "-m", "compactor", "plan", "--project-dir", str(proj)], check=True)
    shutil.copytree(proj, proj.with_name(f"pristine-{proj.name}"))


def native(root: Path) -> None:
    _restore(root)
    start = time.perf_counter()
    spark, _ = _session(root, bare=True)
    t = f"{CATALOG}.db.t"
    out = spark.sql(f"CALL {CATALOG}.system.rewrite_data_files(table => 'db.t')").collect()[0]
    n = spark.sql(f"SELECT count(*) FROM {t}").collect()[0][0]
    print(f"native: {out[0]} -> {out[1]} files, {n} rows, {time.perf_counter() - start:.1f}s")


def compactor(root: Path, project: str = "proj") -> None:
    _restore(root)
    proj = root / project
    r = subprocess.run([sys.executable, "-m", "compactor", "apply", str(proj / "target" / "plan.json"),
                        "--project-dir", str(proj)], capture_output=True, text=True)
    if r.returncode != 0:
        sys.exit(r.stdout[-2000:] + r.stderr[-2000:])
    print(r.stdout.strip().splitlines()[-1])


if __name__ == "__main__":
    {"setup": setup, "native": native, "compactor": compactor,
     "local": lambda root: compactor(root, "proj-local")}[sys.argv[1]](Path(sys.argv[2]))
