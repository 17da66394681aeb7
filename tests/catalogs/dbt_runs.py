"""Run a dbt project with dbt-spark's session method in this process, in a Delta-enabled SparkSession with
a Hive metastore on embedded Derby (tables persist across processes): one JVM for every dbt command.

    python tests/catalogs/dbt_runs.py PROJECT METASTORE WAREHOUSE FIRST_RUN LAST_RUN [seed]

Runs `dbt seed` when asked, then `dbt run --vars {run: N}` for N in FIRST_RUN..LAST_RUN, and prints one
line per command. dbt starts worker processes that import __main__ again: hence the guard below."""

from __future__ import annotations

import sys


def main(project: str, metastore: str, warehouse: str, first: int, last: int, seed: bool) -> int:
    from compactor.formats.delta.spark import build_session

    spark = build_session("local[2]", "dbt", {
        "spark.sql.catalogImplementation": "hive", "spark.sql.warehouse.dir": warehouse,
        "spark.hadoop.javax.jdo.option.ConnectionURL": f"jdbc:derby:;databaseName={metastore};create=true",
        "spark.driver.extraJavaOptions": f"-Dderby.stream.error.file={metastore}.log",
        "spark.sql.shuffle.partitions": "2"}, delta_jars=True)
    from dbt.cli.main import dbtRunner

    runner = dbtRunner()
    common = ["--project-dir", project, "--profiles-dir", project, "--quiet"]
    commands = ([["seed", *common]] if seed else []) + [["run", *common, "--vars", f"{{run: {i}}}"]
                                                        for i in range(first, last + 1)]
    for args in commands:
        result = runner.invoke(args)
        print(args[0], "ok" if result.success else f"FAILED {result.exception or ''}", flush=True)
        if not result.success:
            return 1
    spark.stop()
    return 0


if __name__ == "__main__":
    a = sys.argv[1:]
    sys.exit(main(a[0], a[1], a[2], int(a[3]), int(a[4]), len(a) > 5 and a[5] == "seed"))
