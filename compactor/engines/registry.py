"""Engine factory: target.engine -> a RewriteEngine (pyspark is imported only for the spark engine)."""

from __future__ import annotations

from compactor.engines.base import RewriteEngine
from compactor.engines.spark_needs import NeedsSource, no_needs
from compactor.errors import UsageError
from compactor.project.model import Target


def create_engine(target: Target, needs: NeedsSource = no_needs) -> RewriteEngine:
    """``needs``: what a Spark session the engine starts needs for the run's tables (engines/spark_needs.py)."""
    if target.engine == "local":
        from compactor.engines.local import LocalEngine

        return LocalEngine(target.storage_options, target.threads)
    if target.engine == "spark":
        from compactor.engines.spark import SparkEngine

        return SparkEngine(target, needs)
    raise UsageError(f"unknown engine {target.engine!r}")
