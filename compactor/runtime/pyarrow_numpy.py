"""Keep numpy out of a compactor command that runs no Spark.

pyarrow imports numpy as it is imported itself: 45-60 ms of a whole ``compactor apply`` or ``plan`` on
the machines of docs/benchmarks.md, and compactor never hands pyarrow a numpy object or asks for one. numpy
is optional to pyarrow, but pyarrow decides once, as ``pyarrow.lib`` loads: if numpy was absent then, no
conversion to or from numpy works in that process, even after numpy is imported (pyarrow.lib's C API is
initialised only then). pyspark needs those conversions (Spark Connect turns nested values into rows
with ``to_numpy``), so numpy can only be left out of a process that will never import pyspark.

A command that has resolved its target calls ``defer_numpy`` when that target runs no Spark
(``Target.runs_spark``: the local engine and no Hive catalog): numpy is then refused, so pyarrow loads
without it. Should pyspark be imported all the same (a defect: a Spark path the predicate missed), its
import fails at once with a message that says so, rather than Spark failing later on a conversion; before
pyarrow is loaded the refusal is simply lifted. A program importing compactor as a library, or a process
that has numpy or pyarrow loaded already, is left as it is.
"""

from __future__ import annotations

import sys

from compactor.runtime.refused_import import RefusedUntilSpark

#: the message of the refused import, should anything in the command ask for numpy
REFUSED = "numpy is not loaded in a compactor command that runs no Spark (compactor.runtime.pyarrow_numpy)"

#: the message when pyspark is imported after pyarrow loaded without numpy
SPARK_AFTER_LEAN_PYARROW = ("pyspark imported in a compactor command that decided it runs no Spark, after pyarrow "
                            "loaded without numpy (a compactor defect: compactor.runtime.pyarrow_numpy; set "
                            "COMPACTOR_LEAN_IMPORTS=0 to work around it)")


def _on_spark() -> None:
    if "pyarrow.lib" in sys.modules:
        raise ImportError(SPARK_AFTER_LEAN_PYARROW, name="pyspark")
    lift()


_FINDER = RefusedUntilSpark("numpy", REFUSED, _on_spark)


def defer_numpy() -> None:
    """Refuse numpy from now on (nothing to do when numpy, pyarrow or pyspark is loaded already, or when
    ``COMPACTOR_LEAN_IMPORTS=0``)."""
    _FINDER.install(unless_loaded=("numpy", "pyarrow", "pyspark"))


def deferred() -> bool:
    """Whether numpy is being refused in this process."""
    return _FINDER.installed


def lift() -> None:
    """Allow numpy again (pyarrow, if not loaded yet, will load with it)."""
    _FINDER.remove()
