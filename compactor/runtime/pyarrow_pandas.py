"""Keep pandas out of a compactor command that never uses it.

pyarrow asks "is pandas installed?" the first time it converts Python values (``pa.array([...])``,
a Python scalar passed to a compute function), and answers by importing pandas: 0.2-0.27 s on the
machines of docs/benchmarks.md, about an eighth of a whole ``compactor plan`` when pandas is installed
(it is wherever pyspark is; apache/arrow#34994). compactor never hands pyarrow a pandas object.

So the command line (``main``) refuses the import of pandas until pyspark is imported: pyarrow then
records "no pandas" (both its Python shim and its C++ conversions treat a failed import as absent, and
retrying costs nothing measurable: 4.3 us per ``pa.array`` either way). The spark engine and the hive
catalog import pyspark, which may use pandas with pyarrow (Spark Connect needs it): at that moment the
refusal is lifted and pyarrow's pandas support is turned fully on (its strict check imports pandas),
before pyspark can make a pandas object. A program importing compactor as a library is left as it is.
"""

from __future__ import annotations

import sys

from compactor.runtime.refused_import import RefusedUntilSpark

#: the message of the refused import, should anything else in a compactor command ask for pandas
REFUSED = "pandas is not loaded in a compactor command that does not run Spark (compactor.runtime.pyarrow_pandas)"


def defer_pandas() -> None:
    """Refuse pandas until pyspark is imported (nothing to do when pandas or pyspark is loaded already, or
    when ``COMPACTOR_LEAN_IMPORTS=0``)."""
    _FINDER.install(unless_loaded=("pandas", "pyspark"))


def lift() -> None:
    """Allow pandas again, and turn pyarrow's pandas support back on if pyarrow recorded it absent."""
    if not _FINDER.remove():
        return
    lib = sys.modules.get("pyarrow.lib")
    shim = getattr(lib, "_pandas_api", None)
    if shim is None:
        return
    try:
        shim.pd  # noqa: B018 - the strict check imports pandas and records it present
    except ImportError:  # not installed, or too old for this pyarrow: pyarrow says so when it is used
        pass


_FINDER = RefusedUntilSpark("pandas", REFUSED, lift)
