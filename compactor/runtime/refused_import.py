"""A package refused to a compactor command until pyspark is imported: the mechanism of
runtime/pyarrow_pandas.py and runtime/pyarrow_numpy.py, which say why each package is left out and what
pyspark's import does to the refusal. ``COMPACTOR_LEAN_IMPORTS=0`` turns every refusal off."""

from __future__ import annotations

import importlib.abc
import os
import sys
from collections.abc import Callable, Sequence
from types import ModuleType
from typing import Any

#: set to 0, nothing is refused
LEAN_IMPORTS_ENV = "COMPACTOR_LEAN_IMPORTS"


class RefusedUntilSpark(importlib.abc.MetaPathFinder):
    """Refuses ``package`` and its submodules with ``message``; calls ``on_spark`` as pyspark is imported
    (it lifts the refusal, or refuses pyspark in turn)."""

    def __init__(self, package: str, message: str, on_spark: Callable[[], None]) -> None:
        self.package, self.message, self.on_spark = package, message, on_spark

    def find_spec(self, name: str, path: Sequence[str] | None = None, target: ModuleType | None = None) -> Any:
        if name == self.package or name.startswith(self.package + "."):
            raise ModuleNotFoundError(self.message, name=name)
        if name == "pyspark":
            self.on_spark()
        return None

    @property
    def installed(self) -> bool:
        return self in sys.meta_path

    def install(self, unless_loaded: Sequence[str]) -> None:
        """Refuse from now on; nothing to do when refused already, when any of ``unless_loaded`` is loaded, or
        when ``COMPACTOR_LEAN_IMPORTS=0``."""
        if os.environ.get(LEAN_IMPORTS_ENV, "1") == "0" or self.installed:
            return
        if any(m in sys.modules for m in unless_loaded):
            return
        sys.meta_path.insert(0, self)

    def remove(self) -> bool:
        """Allow the package again; whether it was refused."""
        if not self.installed:
            return False
        sys.meta_path.remove(self)
        return True
