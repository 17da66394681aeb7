"""The project's one Spark line (issue 39): pyspark 4.1.x, where Delta Lake 4.4.0 and Iceberg 1.12.0 both have
jars on Maven Central. What compactor asks Ivy for Delta (formats/delta/spark.py, through delta-spark's own
helper), what the Spark Connect test server loads, and what the tests load for Iceberg name that line: a
loose bump of pyspark or delta-spark that would ask for jars nobody serves fails here, without a JVM."""

from __future__ import annotations

import pytest

pytest.importorskip("delta", reason="delta-spark is part of the [spark] extra")


def test_delta_and_iceberg_jars_are_asked_for_the_spark_41_line() -> None:
    import pyspark

    from compactor.formats.delta.spark import spark_needs
    from tests.iceberg.spark_tables import runtime_package
    from tests.spark_connect import delta_package

    assert pyspark.__version__.startswith("4.1.")
    (delta,) = spark_needs(True, True)
    assert delta.packages == ("io.delta:delta-spark_4.1_2.13:4.4.0",)
    assert delta_package() == "io.delta:delta-spark_4.1_2.13:4.4.0"
    assert runtime_package() == "org.apache.iceberg:iceberg-spark-runtime-4.1_2.13:1.12.0"
