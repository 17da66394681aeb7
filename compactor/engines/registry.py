"""Engine factory: target.engine -> a RewriteEngine (pyspark is imported only for the spark engine)."""

from __future__ import annotations

from compactor.engines.base import RewriteEngine
from compactor.errors import UsageError
from compactor.project.model import Target


def create_engine(target: Target) -> RewriteEngine:
    if target.engine == "local":
        from compactor.engines.local import LocalEngine

        return LocalEngine(target.storage_options, target.threads)
    if target.engine == "spark":
        from compactor.engines.spark import SparkEngine

        return SparkEngine(target)
    raise UsageError(f"unknown engine {target.engine!r}")
