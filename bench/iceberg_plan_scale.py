"""Plan-time scalability on Iceberg (issue 39): ``compactor plan`` vs a bare pyiceberg ``inspect.files()`` load,
whole process each, on a synthetic table of N data files across 1,000 identity partitions of an int column.

The table lives in a pyiceberg SqlCatalog on sqlite under DIR. Its data files never exist (planning never
opens them, as bench/plan_scale.py's Delta log): ``setup`` commits DataFile entries, with per-column metrics
as a writer leaves them (sizes, value, null and NaN counts, lower and upper bounds of every column), through
pyiceberg's public fast append, in COMMITS snapshots (one manifest each); a fast append checks no file.
Every tenth partition holds files already at the target size, so the policy plans the other 900.

    python bench/iceberg_plan_scale.py setup /tmp/iceplan --files 100000 [--commits 20]
    python bench/iceberg_plan_scale.py compactor /tmp/iceplan    # python -m compactor plan --project-dir DIR/proj
    python bench/iceberg_plan_scale.py bare /tmp/iceplan         # SqlCatalog, load_table, inspect.files()
    python bench/iceberg_plan_scale.py scan /tmp/iceplan         # the same, list(scan().plan_files()) (context)

Time the two last commands whole process, alternating (A B A B ...), e.g. each under ``/usr/bin/time -v``; each
prints one line (what it read, its time inside the process, its peak RSS in MiB).
"""

from __future__ import annotations

import argparse
import os
import resource
import shutil
import subprocess
import sys
import time
from pathlib import Path

PARTITIONS = 1000
CATALOG, NAMESPACE, TABLE = "bench", "db", "events"
#: the policy's target size; every tenth partition's files are this large already (nothing to compact there)
TARGET = 128 * 2**20

BARE = """
import sys, time, resource
t0 = time.perf_counter()
from pyiceberg.catalog.sql import SqlCatalog
cat = SqlCatalog(sys.argv[1], uri=sys.argv[2], warehouse=sys.argv[3])
table = cat.load_table(sys.argv[4])
files = table.inspect.files()  # a pyarrow Table: every column materialised
print(f"bare: {files.num_rows} files, {files.nbytes / 2**20:.1f} MiB arrow, {time.perf_counter() - t0:.2f} s, "
      f"peak {resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024:.0f} MiB")
"""

#: context, not the goal's yardstick: pyiceberg's own planning read (every manifest, a FileScanTask per file)
SCAN = """
import sys, time, resource
t0 = time.perf_counter()
from pyiceberg.catalog.sql import SqlCatalog
cat = SqlCatalog(sys.argv[1], uri=sys.argv[2], warehouse=sys.argv[3])
table = cat.load_table(sys.argv[4])
tasks = list(table.scan().plan_files())
print(f"scan: {len(tasks)} tasks, {time.perf_counter() - t0:.2f} s, "
      f"peak {resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024:.0f} MiB")
"""


def _uris(root: Path) -> tuple[str, str]:
    return f"sqlite:///{root}/catalog.db", f"file://{root}/warehouse"


def _data_file(location: str, i: int, part: int, size: int, now_us: int) -> object:
    from pyiceberg.conversions import to_bytes
    from pyiceberg.manifest import DataFile, DataFileContent, FileFormat
    from pyiceberg.typedef import Record
    from pyiceberg.types import DoubleType, IntegerType, LongType, StringType, TimestampType

    rows = 1000
    lo, hi = i * rows, i * rows + rows - 1
    bounds = {1: (LongType(), lo, hi), 2: (IntegerType(), part, part), 3: (TimestampType(), now_us - 86_400_000_000,
              now_us), 4: (DoubleType(), 0.0, 1.0), 5: (StringType(), f"a{i:08d}", f"z{i:08d}")}
    f = DataFile.from_args(
        content=DataFileContent.DATA, file_path=f"{location}/part={part}/{i:08d}-0-data.parquet",
        file_format=FileFormat.PARQUET, partition=Record(part), record_count=rows, file_size_in_bytes=size,
        column_sizes={k: size // 5 for k in bounds}, value_counts={k: rows for k in bounds},
        null_value_counts={k: 0 for k in bounds}, nan_value_counts={4: 0},
        lower_bounds={k: to_bytes(t, a) for k, (t, a, _) in bounds.items()},
        upper_bounds={k: to_bytes(t, b) for k, (t, _, b) in bounds.items()},
        split_offsets=[4], sort_order_id=None, key_metadata=None, equality_ids=None)
    f.spec_id = 0
    return f


def setup(root: Path, n_files: int, commits: int) -> None:
    from pyiceberg.catalog.sql import SqlCatalog
    from pyiceberg.partitioning import PartitionField, PartitionSpec
    from pyiceberg.schema import Schema
    from pyiceberg.transforms import IdentityTransform
    from pyiceberg.types import DoubleType, IntegerType, LongType, NestedField, StringType, TimestampType

    shutil.rmtree(root, ignore_errors=True)
    (root / "warehouse").mkdir(parents=True)
    uri, warehouse = _uris(root)
    cat = SqlCatalog(CATALOG, uri=uri, warehouse=warehouse)
    cat.create_namespace(NAMESPACE)
    schema = Schema(NestedField(1, "id", LongType()), NestedField(2, "part", IntegerType()),
                    NestedField(3, "ts", TimestampType()), NestedField(4, "value", DoubleType()),
                    NestedField(5, "name", StringType()))
    table = cat.create_table(f"{NAMESPACE}.{TABLE}", schema=schema,
                             partition_spec=PartitionSpec(PartitionField(2, 1000, IdentityTransform(), "part")),
                             properties={"format-version": "2"})
    location = table.location().rstrip("/") + "/data"
    now_us = int(time.time() * 1_000_000)
    t0 = time.time()
    per_commit = -(-n_files // commits)
    for start in range(0, n_files, per_commit):
        with table.transaction() as tx, tx.update_snapshot().fast_append() as append:
            for i in range(start, min(n_files, start + per_commit)):
                part = i % PARTITIONS
                size = TARGET + 2**20 if part % 10 == 0 else 200_000 + (i * 7919) % 3_000_000
                append.append_data_file(_data_file(location, i, part, size, now_us))  # type: ignore[arg-type]
        print(f"committed {min(n_files, start + per_commit):,} files ({time.time() - t0:.1f} s)", file=sys.stderr)
    table = cat.load_table(f"{NAMESPACE}.{TABLE}")
    snap = table.current_snapshot()
    assert snap is not None
    print(f"{len(table.metadata.snapshots)} snapshots, {len(snap.manifests(table.io))} manifests", file=sys.stderr)

    proj = root / "proj"
    shutil.rmtree(proj, ignore_errors=True)
    (proj / "policies").mkdir(parents=True)
    (proj / "compactor.yml").write_text("name: iceplan\n")
    (proj / "profiles.yml").write_text(
        "default:\n  target: dev\n  outputs:\n    dev:\n      engine: local\n      catalogs:\n"
        f"        {CATALOG}: {{type: sql, uri: \"{uri}\", warehouse: \"{warehouse}\"}}\n")
    (proj / "policies" / "events.yml").write_text(
        "version: 1\ntables:\n  - name: events\n    format: iceberg\n"
        f"    catalog: {{name: {CATALOG}, namespace: {NAMESPACE}, table: {TABLE}}}\n"
        f"    compaction: {{target_file_size: {TARGET // 2**20}MiB, min_file_size: 64MiB, "
        "triggers: {min_input_files: 2}}\n")


def run_compactor(root: Path) -> None:
    t0 = time.perf_counter()
    out = subprocess.run([sys.executable, "-m", "compactor", "plan", "--project-dir", str(root / "proj")],
                         capture_output=True, text=True)
    took = time.perf_counter() - t0
    if out.returncode != 0:
        sys.exit(f"compactor plan failed ({out.returncode}):\n{out.stdout}{out.stderr}")
    import json

    (table,) = json.loads((root / "proj" / "target" / "plan.json").read_text())["tables"]
    actions = table["actions"]
    peak = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss / 1024
    print(f"compactor: {table['files_before']} files, {len(actions)} actions, "
          f"{sum(a['input_files'] for a in actions)} files planned, {took:.2f} s, peak {peak:.0f} MiB")


def run_bare(root: Path, code: str) -> None:
    uri, warehouse = _uris(root)
    out = subprocess.run([sys.executable, "-c", code, CATALOG, uri, warehouse, f"{NAMESPACE}.{TABLE}"])
    sys.exit(out.returncode)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("what", choices=("setup", "compactor", "bare", "scan"))
    ap.add_argument("dir", type=Path)
    ap.add_argument("--files", type=int, default=100_000)
    ap.add_argument("--commits", type=int, default=20)
    args = ap.parse_args()
    root = args.dir.resolve()
    os.environ.setdefault("PYTHONPATH", str(Path(__file__).resolve().parents[1]))
    if args.what == "setup":
        setup(root, args.files, args.commits)
    elif args.what == "compactor":
        run_compactor(root)
    else:
        run_bare(root, BARE if args.what == "bare" else SCAN)


if __name__ == "__main__":
    main()
