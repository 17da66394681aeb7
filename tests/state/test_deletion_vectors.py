"""Deletion vectors decoded from the log's descriptors (formats/delta/read/deletion_vectors.py): the same
positions as delta-rs reads from every fixture table it can read, each Roaring container kind, both
RoaringBitmapArray formats, inline and on-disk vectors, and every corruption refused."""

from __future__ import annotations

import struct
import zlib
from pathlib import Path

import pyarrow as pa
import pytest
from deltalake import DeltaTable

from compactor.formats.delta.read.deletion_vectors import (
    MAGIC,
    NATIVE_MAGIC,
    DeletionVector,
    DeletionVectorError,
    deleted_positions,
)
from compactor.formats.delta.read.log_paths import _Z85
from compactor.formats.delta.read.log_replay import replay
from compactor.models.table import TableLocation
from compactor.runtime.storage import storage_for
from tests.conftest import FIXTURES, FIXTURES_MISSING

#: fixture tables whose deletion vectors delta-rs 1.6 reads (the others name files under a prefix it cannot resolve)
READABLE = ("delta-golden/dv-with-columnmapping", "delta-rs/table-with-dv-small", "delta-rs/cdf-table-with-cdc-and-dvs",
            "delta-rs/table_with_deletion_logs", "delta-golden/log-replay-dv-key-cases")


@pytest.mark.parametrize("name", READABLE)
def test_decoded_positions_are_delta_rs_masks(name: str) -> None:
    uri = str(FIXTURES / name)
    if not (FIXTURES / name).is_dir():
        pytest.skip(FIXTURES_MISSING)
    logged = replay(TableLocation(uri))
    assert logged.deletion_vectors
    masks = pa.table(DeltaTable(uri).deletion_vectors())
    theirs = {p.split(uri + "/", 1)[1]: [i for i, keep in enumerate(m) if not keep]
              for p, m in zip(masks.column("filepath").to_pylist(), masks.column("selection_vector").to_pylist())}
    store = storage_for(uri, {})
    mine = {p: deleted_positions(DeletionVector(dv), store.read_bytes, uri) for p, dv in logged.deletion_vectors.items()}
    assert mine == {p: theirs[p] for p in mine}


# -- a small encoder of the formats the protocol specifies, to build vectors of every kind -------------

def _container(values: list[int], kind: str) -> bytes:
    """``kind``: "run", or "bitmap" (a container of more than 4096 values; the format reads fewer as an array)."""
    if kind == "array" or (kind == "bitmap" and len(values) <= 4096):
        return struct.pack(f"<{len(values)}H", *values)
    if kind == "bitmap":
        words = [0] * 1024
        for v in values:
            words[v // 64] |= 1 << (v % 64)
        return struct.pack("<1024Q", *words)
    runs: list[list[int]] = []
    for v in values:
        if runs and runs[-1][0] + runs[-1][1] + 1 == v:
            runs[-1][1] += 1
        else:
            runs.append([v, 0])
    return struct.pack(f"<H{2 * len(runs)}H", len(runs), *(x for r in runs for x in r))


def _roaring32(values: list[int], kind: str) -> bytes:
    """One 32-bit portable Roaring bitmap, every container of ``kind``."""
    by_key: dict[int, list[int]] = {}
    for v in values:
        by_key.setdefault(v >> 16, []).append(v & 0xFFFF)
    keys = sorted(by_key)
    header = b"".join(struct.pack("<HH", k, len(by_key[k]) - 1) for k in keys)
    bodies = [_container(by_key[k], kind) for k in keys]
    if kind == "run":
        flags = bytes([(1 << len(keys)) - 1]) if len(keys) < 8 else b"\xff" * ((len(keys) + 7) // 8)
        head = struct.pack("<I", 12347 | (len(keys) - 1) << 16) + flags + header
        offsets = b""
        if len(keys) >= 4:
            raise AssertionError("keep run bitmaps under 4 containers in these tests")
    else:
        head = struct.pack("<II", 12346, len(keys)) + header
        at = len(head) + 4 * len(keys)
        offsets = b""
        for b in bodies:
            offsets += struct.pack("<I", at)
            at += len(b)
    return head + offsets + b"".join(bodies)


def _array(values: list[int], kind: str, native: bool = False) -> bytes:
    buckets: dict[int, list[int]] = {}
    for v in sorted(values):
        buckets.setdefault(v >> 32, []).append(v & 0xFFFFFFFF)
    if native:
        out = struct.pack("<Ii", NATIVE_MAGIC, max(buckets) + 1)
        for key in range(max(buckets) + 1):
            body = _roaring32(buckets.get(key, []), kind) if key in buckets else struct.pack("<II", 12346, 0)
            out += struct.pack("<I", len(body)) + body
        return out
    return struct.pack("<IQ", MAGIC, len(buckets)) + b"".join(
        struct.pack("<I", k) + _roaring32(buckets[k], kind) for k in sorted(buckets))


def _z85(data: bytes) -> str:
    padded = data + b"\0" * (-len(data) % 4)
    out = []
    for k in range(0, len(padded), 4):
        n = int.from_bytes(padded[k:k + 4], "big")
        out.append("".join(_Z85[n // 85 ** e % 85] for e in range(4, -1, -1)))
    return "".join(out)


def _inline(values: list[int], kind: str, native: bool = False) -> DeletionVector:
    data = _array(values, kind, native)
    return DeletionVector({"storageType": "i", "pathOrInlineDv": _z85(data), "sizeInBytes": len(data),
                           "cardinality": len(values)})


POSITIONS = {
    "array": [0, 3, 4, 7, 65535, 65536, 70000, (1 << 32) + 5],
    "bitmap": list(range(0, 20000, 3)) + [(1 << 32) + 1],
    "run": list(range(100, 5000)) + list(range(65536, 65600)) + [(2 << 32) + 7],
}


@pytest.mark.parametrize("kind", sorted(POSITIONS))
@pytest.mark.parametrize("native", [False, True], ids=["portable", "native"])
def test_every_container_kind_and_format_decodes(kind: str, native: bool) -> None:
    values = POSITIONS[kind]
    assert deleted_positions(_inline(values, kind, native), None, "/t") == sorted(values)


def _on_disk(tmp_path: Path, values: list[int], *, crc_delta: int = 0, size_delta: int = 0) -> DeletionVector:
    data = _array(values, "array")
    blob = b"\x01" + b"pad" + struct.pack(">I", len(data)) + data + struct.pack(">I", zlib.crc32(data) + crc_delta)
    (tmp_path / "ab").mkdir(exist_ok=True)
    (tmp_path / "ab" / "deletion_vector_d2c639aa-8816-431a-aaf6-d3fe2512ff61.bin").write_bytes(blob)
    return DeletionVector({"storageType": "u", "pathOrInlineDv": "ab^-aqEH.-t@S}K{vb[*k^", "offset": 4,
                           "sizeInBytes": len(data) + size_delta, "cardinality": len(values)})


def test_an_on_disk_vector_at_its_offset_decodes(tmp_path: Path) -> None:
    store = storage_for(str(tmp_path), {})
    assert deleted_positions(_on_disk(tmp_path, [1, 2, 9]), store.read_bytes, str(tmp_path)) == [1, 2, 9]


@pytest.mark.parametrize(("case", "message"), [
    ("checksum", "checksum mismatch"), ("size", "the file says 38 bytes, the descriptor 37"), ("cardinality", "its cardinality says 4"),
    ("magic", "magic number"), ("missing", "is not on storage"), ("trailing", "after the bitmap"),
])
def test_a_vector_that_does_not_prove_itself_is_refused(tmp_path: Path, case: str, message: str) -> None:
    store = storage_for(str(tmp_path), {})
    if case in ("checksum", "size", "missing"):
        dv = _on_disk(tmp_path, [1, 2, 9], crc_delta=int(case == "checksum"), size_delta=-1 if case == "size" else 0)
        if case == "missing":
            for f in (tmp_path / "ab").iterdir():
                f.unlink()
    else:
        data = _array([1, 2, 9], "array")
        if case == "magic":
            data = b"\0\0\0\0" + data[4:]
        if case == "trailing":
            data += b"\0"
        dv = DeletionVector({"storageType": "i", "pathOrInlineDv": _z85(data), "sizeInBytes": len(data),
                             "cardinality": 4 if case == "cardinality" else 3})
    with pytest.raises(DeletionVectorError, match=message):
        deleted_positions(dv, store.read_bytes, str(tmp_path))
