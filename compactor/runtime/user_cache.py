"""compactor's folder in the user's cache directory (``COMPACTOR_CACHE_DIR``, else
``$XDG_CACHE_HOME/compactor``, else ``~/.cache/compactor``). Everything kept there is a shortcut: when the
folder cannot be read or written, the work is simply done again. (policy/schema.py keeps its memo of
validated documents in the same folder; policy/ imports no other layer, so it spells the folder itself.)"""

from __future__ import annotations

import os
from pathlib import Path


def cache_dir() -> Path:
    base = os.environ.get("COMPACTOR_CACHE_DIR") or os.path.join(
        os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache"), "compactor")
    return Path(base)
