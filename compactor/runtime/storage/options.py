"""``storage_options`` as users write them -> obstore's ``from_url(config=, client_options=, retry_config=)``.

Users write one flat mapping of object_store's keys (``AWS_ENDPOINT_URL``, ``AWS_ALLOW_HTTP``,
``aws_conditional_put``, ...), the convention of the table libraries built on the Rust ``object_store``
crate, which also take keys of their own. obstore splits them into three arguments and is strict about
them (docs/notes/object-stores.md): keys are lower-cased; client options (``allow_http``, ``timeout``,
``proxy_url``, ..., also with a store prefix such as ``AWS_ALLOW_HTTP``) go to ``client_options``;
``max_retries``/``retry_timeout`` go to ``retry_config``; the table libraries' own keys (log stores,
locking) are dropped; the rest is store config.
"""

from __future__ import annotations

import logging
import re
from collections.abc import Mapping
from datetime import timedelta
from typing import Any

from compactor.runtime.storage.base import StorageError

log = logging.getLogger(__name__)

#: object_store client options (not store config); accepted bare or with a store prefix
_CLIENT_KEYS = {"allow_http", "allow_invalid_certificates", "connect_timeout", "default_content_type", "http1_only",
                "http2_keep_alive_interval", "http2_keep_alive_timeout", "http2_keep_alive_while_idle",
                "http2_max_frame_size", "http2_only", "pool_idle_timeout", "pool_max_idle_per_host", "proxy_url",
                "proxy_ca_certificate", "proxy_excludes", "randomize_addresses", "timeout", "user_agent"}
_PREFIXES = ("aws_", "azure_storage_", "azure_", "google_", "gcs_")
#: keys of the table libraries' own (log stores, locking) that object_store does not take
_TABLE_LIBRARY_KEYS = {"aws_s3_allow_unsafe_rename", "aws_s3_locking_provider", "delta_dynamo_table_name",
               "dynamo_lock_table_name", "aws_ec2_metadata_disabled", "mount_allow_unsafe_rename",
               "max_retries", "retry_timeout"}


def _parse_duration(value: str) -> timedelta:
    m = re.fullmatch(r"\s*(\d+(?:\.\d+)?)\s*(ms|s|m|h)?\s*", str(value))
    if not m:
        raise StorageError("retry_timeout: expected a duration such as 30s, 500ms or 2m")
    n, unit = float(m.group(1)), m.group(2) or "s"
    return timedelta(seconds=n * {"ms": 0.001, "s": 1, "m": 60, "h": 3600}[unit])


def split_options(storage_options: Mapping[str, Any]) -> tuple[dict[str, str], dict[str, Any], dict[str, Any]]:
    """``storage_options`` (object_store's keys, and the table libraries' own) -> obstore (config,
    client_options, retry_config)."""
    config: dict[str, str] = {}
    client: dict[str, Any] = {}
    retry: dict[str, Any] = {}
    for key, value in storage_options.items():
        k = key.lower()
        bare = next((k[len(p):] for p in _PREFIXES if k.startswith(p) and k[len(p):] in _CLIENT_KEYS), k)
        if bare in _CLIENT_KEYS:
            client[bare] = str(value)
        elif k == "max_retries":
            retry["max_retries"] = int(value)
        elif k == "retry_timeout":
            retry["retry_timeout"] = _parse_duration(value)
        elif k in _TABLE_LIBRARY_KEYS:
            log.debug("storage option %s is a table library's own; not passed to the object store", key)
        else:
            config[k] = str(value)
    return config, client, retry
