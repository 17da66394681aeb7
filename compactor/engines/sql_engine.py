"""What a table format may ask of an engine that runs SQL in a Spark session (the spark engine), as neutral
primitives: a format builds its own statements and procedures from them, in its own folder."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from contextlib import AbstractContextManager
from typing import Any, Protocol, runtime_checkable

from compactor.engines.spark_needs import SparkNeeds
from compactor.project.model import SparkSettings


@runtime_checkable
class SqlEngine(Protocol):
    """An engine that runs SQL in a Spark session (the spark engine): what a format's own SQL needs of it.
    The local engine is not one; compactor's rewrite needs only ``RewriteEngine``. No member opens the session when
    ``isinstance`` looks for it (Python 3.11 reads each member)."""

    @property
    def settings(self) -> SparkSettings: ...

    def is_spark_connect(self) -> bool: ...

    def provides(self, needs: SparkNeeds) -> bool: ...

    def sql(self, statement: str, conf: Mapping[str, str] | None = None) -> list[Any]: ...

    def setting(self, key: str) -> str | None: ...

    def local_master(self) -> bool: ...

    def session_conf(self, conf: Mapping[str, str]) -> AbstractContextManager[None]: ...

    def temp_view(self, rows: Sequence[tuple[Any, ...]], schema: str) -> AbstractContextManager[str]: ...

    def hadoop_path(self, uri: str) -> str: ...
