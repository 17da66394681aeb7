"""Where a Delta log's paths point: a file action's path relative to the table root (the log stores it
URL-encoded, relative or as an absolute URI of any scheme spelling the same store), and the file a deletion
vector descriptor names (PROTOCOL.md: ``u`` = a random prefix and a base85 (Z85) UUID, the file
``<prefix>/deletion_vector_<uuid>.bin`` under the root; ``r`` = a path relative to the root; ``p`` = an
absolute URI; ``i`` = inline, no file)."""

from __future__ import annotations

import re
import uuid
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any
from urllib.parse import quote, unquote, urlsplit

from compactor.runtime.paths import is_remote

#: characters delta-rs' create_write_transaction leaves as they are when it encodes a path for the log
#: (measured with deltalake 1.6.6: it encodes space, non-ASCII and "#%*<>?[]^`{|}")
DELTA_RS_SAFE = "/!$&'()+,-.:;=@_~"
_ENCODED_BY_DELTA_RS = re.compile(r"[^A-Za-z0-9" + re.escape(DELTA_RS_SAFE) + "]")


def spelled_otherwise(logical: str, spelled: str) -> bool:
    """Whether the log spells a file's path (``spelled``, as its action has it) otherwise than delta-rs'
    encoding of the decoded ``logical`` path would (Spark writes non-ASCII characters raw)."""
    if spelled == logical and not _ENCODED_BY_DELTA_RS.search(logical):
        return False  # nearly every path: nothing to encode, nothing encoded
    return quote(logical, safe=DELTA_RS_SAFE) != spelled


#: Delta's Base85 alphabet (Z85's characters; Delta's Codec.Base85Codec)
_Z85 = "0123456789abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ.-:+=^!/*?&<>()[]{}@%$#"
_Z85_VALUE = {c: i for i, c in enumerate(_Z85)}
#: each Z85 character's value (formats/delta/read/deletion_vectors.py decodes inline vectors with it)
Z85_VALUE = _Z85_VALUE
#: one object store, however its URI spells the scheme (Spark writes s3a://, delta-rs s3://)
_SCHEME_FAMILY = {"s3a": "s3", "s3n": "s3", "abfs": "az", "abfss": "az", "wasb": "az", "wasbs": "az",
                  "adl": "az", "azure": "az", "gcs": "gs"}


def z85_uuid(encoded: str) -> uuid.UUID:
    """The UUID a deletion vector's 20 base85 characters encode (four 5-character blocks of 4 bytes,
    big-endian). ValueError for any other text."""
    if len(encoded) != 20:
        raise ValueError(f"an encoded UUID has 20 characters, not {len(encoded)}")
    out = bytearray()
    for k in range(0, 20, 5):
        n = 0
        for c in encoded[k:k + 5]:
            if c not in _Z85_VALUE:
                raise ValueError(f"{c!r} is not a base85 character")
            n = n * 85 + _Z85_VALUE[c]
        if n >= 1 << 32:
            raise ValueError("a base85 block beyond 32 bits")
        out += n.to_bytes(4, "big")
    return uuid.UUID(bytes=bytes(out))


def _object_key(uri: str) -> tuple[str, str, str] | None:
    """(store family, bucket or container, key) of an object-store URI; None for anything else."""
    parts = urlsplit(uri)
    if not parts.scheme or parts.scheme == "file":
        return None
    family = _SCHEME_FAMILY.get(parts.scheme, parts.scheme)
    bucket = parts.netloc.split("@", 1)[0] if "@" in parts.netloc else parts.netloc
    return family, bucket, unquote(parts.path).strip("/")


def _local(path: str) -> str:
    """A local path from ``/p``, ``file:/p`` (Hadoop) or ``file:///p``."""
    if path.startswith("file:"):
        path = path[len("file:"):]
        while path.startswith("//"):
            path = path[1:]
    return path.rstrip("/")


def relative_to_root(path: str, root: str) -> str:
    """A decoded log path relative to the table ``root``: a relative one stays; an absolute URI or path
    inside the root loses the root; one outside it stays as it is."""
    if not path.startswith("/") and "://" not in path and not path.startswith("file:"):
        return path
    if is_remote(root):
        mine, theirs = _object_key(root), _object_key(path)
        if mine is not None and theirs is not None and mine[:2] == theirs[:2] \
                and theirs[2].startswith(mine[2] + "/" if mine[2] else ""):
            return theirs[2][len(mine[2]) + 1:] if mine[2] else theirs[2]
        return path
    base, target = _local(unquote(root) if root.startswith("file:") else root), _local(path)
    return target[len(base) + 1:] if target.startswith(base + "/") else path


@dataclass(frozen=True)
class DeletionVectorFile:
    """The file a deletion vector descriptor names: relative to the table root (decoded), or an absolute
    URI outside it; ``uuid`` when its name carries one (``deletion_vector_<uuid>.bin``)."""

    path: str
    uuid: str | None = None


_DV_NAME = re.compile(r"deletion_vector_([0-9a-fA-F-]{36})\.bin$")


def dv_uuid_of(path: str) -> str | None:
    """The UUID in a deletion vector file's name, whatever a writer put before ``deletion_vector_``."""
    m = _DV_NAME.search(path)
    return m.group(1).lower() if m else None


def dv_file(dv: Mapping[str, Any] | None, root: str) -> DeletionVectorFile | None:
    """The file of a deletion vector descriptor; None for none or an inline one. ValueError for a
    descriptor the protocol does not define (the caller then deletes nothing)."""
    if not dv:
        return None
    kind, text = dv.get("storageType"), dv.get("pathOrInlineDv")
    if kind == "i":
        return None
    if not isinstance(text, str) or not text:
        raise ValueError(f"a deletion vector of storage type {kind!r} without pathOrInlineDv")
    if kind == "u":
        prefix, ident = text[:-20], str(z85_uuid(text[-20:]))
        name = f"deletion_vector_{ident}.bin"
        return DeletionVectorFile(f"{prefix}/{name}" if prefix else name, ident)
    if kind == "r":
        path = text.lstrip("/")
    elif kind == "p":
        path = relative_to_root(unquote(text), root)
    else:
        raise ValueError(f"unknown deletion vector storage type {kind!r}")
    return DeletionVectorFile(path, dv_uuid_of(path))
