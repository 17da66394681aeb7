"""What a VACUUM may delete, listed by compactor's deletion gate (its own log replay and one listing of the
table: compactor/formats/delta/read/vacuum_listing.py) against delta-rs' full-mode VACUUM dry run, which compactor
listed with before issue 36, on a table of many files.

    python bench/vacuum_listing.py build /tmp/vac --files 100000 --removed 20000
    /usr/bin/time -v python bench/vacuum_listing.py list /tmp/vac --side delta-rs     # then, in turn:
    /usr/bin/time -v python bench/vacuum_listing.py list /tmp/vac --side compactor

``build`` writes one commit of ``--files`` adds in 100 partitions, then one of ``--removed`` removes (old
tombstones), a delta-rs checkpoint, and an empty file on storage for each (VACUUM never reads a data file).
``list`` prints how many files the side would delete and its time."""

from __future__ import annotations

import argparse
import json
import os
import time
import uuid
from pathlib import Path


def build(root: Path, files: int, removed: int) -> None:
    import pyarrow as pa
    from deltalake import DeltaTable, write_deltalake

    write_deltalake(str(root), pa.table({"p": pa.array([0], pa.int64()), "id": pa.array([0], pa.int64())}),
                    partition_by=["p"])
    paths = [f"p={k % 100}/part-{uuid.uuid4()}.c000.snappy.parquet" for k in range(files)]
    for p in paths:
        f = root / p
        f.parent.mkdir(parents=True, exist_ok=True)
        f.touch()
    old = int((time.time() - 30 * 86400) * 1000)
    log = root / "_delta_log"
    adds = [{"add": {"path": p, "partitionValues": {"p": p.split("/")[0][2:]}, "size": 1, "modificationTime": old,
                     "dataChange": True, "stats": '{"numRecords": 1}'}} for p in paths]
    (log / "00000000000000000001.json").write_text("\n".join(json.dumps(a) for a in adds) + "\n")
    removes = [{"remove": {"path": p, "deletionTimestamp": old, "dataChange": True, "extendedFileMetadata": True,
                           "partitionValues": {"p": p.split("/")[0][2:]}, "size": 1}} for p in paths[:removed]]
    (log / "00000000000000000002.json").write_text("\n".join(json.dumps(r) for r in removes) + "\n")
    DeltaTable(str(root)).create_checkpoint()
    when = time.time() - 30 * 86400
    for p in paths:
        os.utime(root / p, (when, when))


def listed(root: Path, side: str) -> int:
    if side == "delta-rs":
        from deltalake import DeltaTable

        return len(DeltaTable(str(root)).vacuum(retention_hours=0, dry_run=True, enforce_retention_duration=False,
                                                full=True))
    from compactor.formats.delta.read.vacuum_listing import vacuum_listing
    from compactor.models.table import TableLocation

    return len(vacuum_listing(TableLocation(str(root)), 0).files)


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("what", choices=["build", "list"])
    ap.add_argument("root", type=Path)
    ap.add_argument("--files", type=int, default=100_000)
    ap.add_argument("--removed", type=int, default=20_000)
    ap.add_argument("--side", choices=["compactor", "delta-rs"], default="compactor")
    a = ap.parse_args()
    if a.what == "build":
        build(a.root, a.files, a.removed)
        return
    t0 = time.perf_counter()
    n = listed(a.root, a.side)
    print(f"{a.side}: {n} file(s) to delete, {time.perf_counter() - t0:.2f}s")


if __name__ == "__main__":
    main()
