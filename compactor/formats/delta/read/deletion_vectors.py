"""A Delta deletion vector's deleted row positions, decoded from the log's descriptor (PROTOCOL.md,
"Deletion Vector Format"), and proved before a rewrite leaves those rows out.

A descriptor names its bitmap inline (``i``: Z85 text of the bytes) or in a file (``u``: a random prefix and
a Z85 UUID, the file ``<prefix>/deletion_vector_<uuid>.bin`` under the table root; ``p``: an absolute path).
A file holds a version byte (1), then per vector a 4-byte big-endian size, the bitmap and its CRC-32; the
descriptor's ``offset`` points at the size. A bitmap is Delta's RoaringBitmapArray: the magic number
1681511377 (4 bytes, little-endian), then a 64-bit Roaring bitmap in the portable format (an 8-byte bucket
count, then per bucket its 4-byte high key and a 32-bit Roaring bitmap of the low 32 bits).

Decoded here rather than taken from delta-rs alone: delta-rs 1.6 cannot resolve vectors stored under a
random prefix (delta-spark writes them so), and any list another library hands us is proved before rows are
dropped by it (apply/deletes.py compares delta-rs' masks with these positions where it can read them)."""

from __future__ import annotations

import struct
import zlib
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, TypedDict, cast

from compactor.formats.delta.read.log_paths import Z85_VALUE, dv_file
from compactor.runtime.storage.base import ObjectNotFoundError

#: Delta's RoaringBitmapArray magic numbers (little-endian): the portable 64-bit format the protocol
#: specifies, and delta-spark's native one (a 4-byte bitmap count, then per bitmap its 4-byte size and a
#: 32-bit Roaring bitmap whose high key is its index), which its reader accepts too
MAGIC = 1681511377
NATIVE_MAGIC = 1681511376
#: the only deletion vector file format version the protocol defines
FILE_VERSION = 1
#: the 32-bit Roaring portable format's cookies (RoaringFormatSpec)
_COOKIE_NO_RUNS = 12346
_COOKIE_RUNS = 12347
#: a run-container bitmap of fewer containers carries no offset header
_NO_OFFSET_THRESHOLD = 4
#: an array container holds at most this many values; more are a 65536-bit bitmap
_ARRAY_MAX = 4096


class DescriptorJson(TypedDict, total=False):
    """A deletion vector descriptor as the log's add and remove actions carry it (PROTOCOL.md), kept as
    read: a remove copies it unchanged."""

    storageType: str
    pathOrInlineDv: str
    offset: int
    sizeInBytes: int
    cardinality: int


def descriptor(value: Mapping[str, Any]) -> DescriptorJson:
    """The descriptor a log action's ``deletionVector`` holds (JSON or a checkpoint's struct), unchanged."""
    return cast(DescriptorJson, dict(value))


class DeletionVectorError(Exception):
    """A deletion vector that cannot be read or does not prove itself (the caller names the file)."""


@dataclass(frozen=True)
class DeletionVector:
    """A deletion vector descriptor exactly as an add action carries it (``raw``: its JSON object, copied
    unchanged into compactor's remove of the file)."""

    raw: DescriptorJson

    @property
    def storage_type(self) -> str:
        return str(self.raw.get("storageType"))

    @property
    def cardinality(self) -> int:
        return int(self.raw.get("cardinality") or 0)

    @property
    def size_in_bytes(self) -> int:
        return int(self.raw.get("sizeInBytes") or 0)

    @property
    def offset(self) -> int:
        return int(self.raw.get("offset") or 0)


def z85_decode(text: str, size: int) -> bytes:
    """The first ``size`` bytes Z85 ``text`` encodes (5 characters -> 4 bytes, big-endian; Delta pads the
    data to a multiple of 4 before encoding)."""
    if len(text) % 5:
        raise DeletionVectorError(f"inline data of {len(text)} characters is not Z85 (a multiple of 5)")
    out = bytearray()
    for k in range(0, len(text), 5):
        n = 0
        for c in text[k:k + 5]:
            v = Z85_VALUE.get(c)
            if v is None:
                raise DeletionVectorError(f"{c!r} is not a Z85 character")
            n = n * 85 + v
        if n >= 1 << 32:
            raise DeletionVectorError("a Z85 block beyond 32 bits")
        out += n.to_bytes(4, "big")
    if len(out) < size:
        raise DeletionVectorError(f"inline data holds {len(out)} bytes, the descriptor says {size}")
    return bytes(out[:size])


def decode_bitmap(data: bytes) -> list[int]:
    """The positions a RoaringBitmapArray holds, ascending (module docstring)."""
    magic = struct.unpack_from("<I", data, 0)[0] if len(data) >= 8 else None
    if magic == NATIVE_MAGIC:
        return _native(data)
    if magic != MAGIC or len(data) < 12:
        raise DeletionVectorError("not a Delta RoaringBitmapArray (magic number missing)")
    buckets = struct.unpack_from("<Q", data, 4)[0]
    at = 12
    out: list[int] = []
    last_key = -1
    for _ in range(buckets):
        if at + 4 > len(data):
            raise DeletionVectorError("bitmap truncated before a bucket key")
        key = struct.unpack_from("<I", data, at)[0]
        if key <= last_key or key >> 31:
            raise DeletionVectorError(f"bucket key {key} out of order or negative")
        last_key = key
        low, at = _roaring32(data, at + 4)
        high = key << 32
        out += [high | v for v in low]
    if at != len(data):
        raise DeletionVectorError(f"{len(data) - at} byte(s) after the bitmap's last bucket")
    return out


def _native(data: bytes) -> list[int]:
    """delta-spark's native RoaringBitmapArray (NATIVE_MAGIC)."""
    count = struct.unpack_from("<i", data, 4)[0]
    if count < 0:
        raise DeletionVectorError(f"a negative bitmap count ({count})")
    at, out = 8, []
    for key in range(count):
        if at + 4 > len(data):
            raise DeletionVectorError("bitmap truncated before a bitmap's size")
        size = struct.unpack_from("<I", data, at)[0]
        low, end = _roaring32(data, at + 4)
        if end != at + 4 + size:
            raise DeletionVectorError(f"a bitmap of {end - at - 4} bytes, its size says {size}")
        at = end
        out += [key << 32 | v for v in low]
    if at != len(data):
        raise DeletionVectorError(f"{len(data) - at} byte(s) after the bitmap's last bucket")
    return out


def _roaring32(data: bytes, at: int) -> tuple[list[int], int]:
    """A 32-bit Roaring bitmap (portable format) at ``at``: (its values ascending, the offset after it)."""
    try:
        cookie = struct.unpack_from("<I", data, at)[0]
        at += 4
        if cookie & 0xFFFF == _COOKIE_RUNS:
            count = (cookie >> 16) + 1
            run_flags = data[at:at + (count + 7) // 8]
            at += (count + 7) // 8
            is_run = [bool(run_flags[i // 8] >> (i % 8) & 1) for i in range(count)]
            has_offsets = count >= _NO_OFFSET_THRESHOLD
        elif cookie == _COOKIE_NO_RUNS:
            count = struct.unpack_from("<I", data, at)[0]
            at += 4
            is_run = [False] * count
            has_offsets = True
        else:
            raise DeletionVectorError(f"unknown Roaring cookie {cookie}")
        header = struct.unpack_from(f"<{2 * count}H", data, at)
        at += 4 * count
        if has_offsets:
            at += 4 * count  # the containers follow in order: their offsets are not needed
        values: list[int] = []
        last = -1
        for i in range(count):
            key, card = header[2 * i], header[2 * i + 1] + 1
            if key <= last:
                raise DeletionVectorError("Roaring containers out of order")
            last = key
            base = key << 16
            if is_run[i]:
                runs = struct.unpack_from("<H", data, at)[0]
                pairs = struct.unpack_from(f"<{2 * runs}H", data, at + 2)
                at += 2 + 4 * runs
                got = [base | v for s, n in zip(pairs[::2], pairs[1::2]) for v in range(s, s + n + 1)]
            elif card <= _ARRAY_MAX:
                got = [base | v for v in struct.unpack_from(f"<{card}H", data, at)]
                at += 2 * card
            else:
                words = struct.unpack_from("<1024Q", data, at)
                at += 8192
                got = [base | (64 * w + b) for w, word in enumerate(words) if word
                       for b in range(64) if word >> b & 1]
            if len(got) != card:
                raise DeletionVectorError(f"a Roaring container holds {len(got)} values, its header says {card}")
            values += got
    except struct.error:
        raise DeletionVectorError("bitmap truncated") from None
    return values, at


def bitmap_bytes(dv: DeletionVector, read: Any, root: str) -> bytes:
    """The RoaringBitmapArray bytes ``dv`` names: inline, or read from its file (``read``: relative path ->
    the file's bytes), checked against the file's size field and CRC-32."""
    if dv.storage_type == "i":
        return z85_decode(str(dv.raw.get("pathOrInlineDv") or ""), dv.size_in_bytes)
    try:
        where = dv_file(dv.raw, root)
    except ValueError as e:
        raise DeletionVectorError(str(e)) from None
    if where is None:
        raise DeletionVectorError(f"a deletion vector of storage type {dv.storage_type!r} names no file")
    try:
        data: bytes = read(where.path)
    except Exception as e:  # noqa: BLE001 - each store raises its own not-found and I/O errors
        gone = isinstance(e, (FileNotFoundError, ObjectNotFoundError))
        raise DeletionVectorError(f"its file {where.path} is not on storage" if gone else
                                  f"its file {where.path} cannot be read ({str(e).splitlines()[0][:200]})") from None
    if not data or data[0] != FILE_VERSION:
        raise DeletionVectorError(f"{where.path}: not a deletion vector file of version {FILE_VERSION}")
    at = dv.offset
    if at + 4 > len(data):
        raise DeletionVectorError(f"{where.path}: offset {at} is past the file's end ({len(data)} bytes)")
    size = struct.unpack_from(">I", data, at)[0]
    if size != dv.size_in_bytes:
        raise DeletionVectorError(f"{where.path}@{at}: the file says {size} bytes, the descriptor {dv.size_in_bytes}")
    body = data[at + 4:at + 4 + size]
    if len(body) != size or at + 8 + size > len(data):
        raise DeletionVectorError(f"{where.path}@{at}: truncated")
    crc = struct.unpack_from(">I", data, at + 4 + size)[0]
    if zlib.crc32(body) != crc:
        raise DeletionVectorError(f"{where.path}@{at}: checksum mismatch")
    return body


def deleted_positions(dv: DeletionVector, read: Any, root: str) -> list[int]:
    """The row positions ``dv`` deletes, ascending, proved against its ``cardinality``."""
    positions = decode_bitmap(bitmap_bytes(dv, read, root))
    if len(positions) != dv.cardinality:
        raise DeletionVectorError(f"it deletes {len(positions)} row(s), its cardinality says {dv.cardinality}")
    return positions
