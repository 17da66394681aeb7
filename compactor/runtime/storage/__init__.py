"""One storage layer for table roots on local disk, S3, Azure and GCS (see ``base.py`` for the interface
and the create_exclusive / put_if_match semantics; ``local.py`` and ``object_store.py`` for the backends;
``options.py`` for the translation of object_store-style storage options to obstore's arguments; ``shared.py`` for the per-process instances).

The redaction helpers live in ``compactor.runtime.secrets``; they are re-exported here for compatibility.
"""

from compactor.runtime.secrets import (
    RedactingFilter,
    error_text,
    install_log_redaction,
    redact,
    redact_error,
    register_secrets,
)
from compactor.runtime.storage.base import (
    SCHEMES,
    ObjectInfo,
    ObjectNotFoundError,
    ObjectVersion,
    Storage,
    StorageError,
)
from compactor.runtime.storage.local import LocalStorage
from compactor.runtime.storage.object_store import ObjectStoreStorage
from compactor.runtime.storage.options import split_options
from compactor.runtime.storage.shared import locate, storage_for

__all__ = [
    "SCHEMES",
    "LocalStorage",
    "ObjectInfo",
    "ObjectNotFoundError",
    "ObjectStoreStorage",
    "ObjectVersion",
    "RedactingFilter",
    "Storage",
    "StorageError",
    "error_text",
    "install_log_redaction",
    "locate",
    "redact",
    "redact_error",
    "register_secrets",
    "split_options",
    "storage_for",
]
