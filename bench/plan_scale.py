"""Plan-time scalability: `compactor plan` vs a bare deltalake get_add_actions() load.

Synthetic Delta tables (log only, no data files: planning never opens them) with N files across 1,000
partitions are written directly as valid JSON commits, then checkpointed by delta-rs itself. Each
measurement runs in a fresh subprocess (side by side, alternating), reporting wall time inside the
process (imports excluded) and peak RSS.

    python bench/plan_scale.py [--sizes 10000,100000,1000000] [--repeat 3] [--dir /tmp/plan-scale]
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import time
import uuid
from pathlib import Path

from compactor.formats.delta.read.state import JEMALLOC_CONF

PARTITIONS = 1000
FILES_PER_COMMIT = 20_000

SCHEMA = json.dumps({"type": "struct", "fields": [
    {"name": "date", "type": "string", "nullable": True, "metadata": {}},
    {"name": "id", "type": "long", "nullable": True, "metadata": {}},
    {"name": "value", "type": "double", "nullable": True, "metadata": {}}]})


def build_table(path: Path, n_files: int) -> None:
    log = path / "_delta_log"
    log.mkdir(parents=True)
    now = int(time.time() * 1000)
    first = [
        {"protocol": {"minReaderVersion": 1, "minWriterVersion": 2}},
        {"metaData": {"id": str(uuid.uuid4()), "format": {"provider": "parquet", "options": {}},
                      "schemaString": SCHEMA, "partitionColumns": ["date"], "configuration": {},
                      "createdTime": now}},
        {"commitInfo": {"timestamp": now, "operation": "CREATE TABLE"}},
    ]
    (log / f"{0:020d}.json").write_text("\n".join(json.dumps(x) for x in first) + "\n")
    version = 0
    for start in range(0, n_files, FILES_PER_COMMIT):
        version += 1
        lines = []
        for i in range(start, min(n_files, start + FILES_PER_COMMIT)):
            part = f"2024-{1 + (i % PARTITIONS) // 28 % 12:02d}-{1 + (i % PARTITIONS) % 28:02d}-{i % PARTITIONS:04d}"
            stats = {"numRecords": 1000, "minValues": {"id": i * 1000, "value": 0.0},
                     "maxValues": {"id": i * 1000 + 999, "value": 1.0}, "nullCount": {"id": 0, "value": 0}}
            lines.append(json.dumps({"add": {"path": f"date={part}/part-{i:08d}-{uuid.UUID(int=i)}.c000.snappy.parquet",
                                             "partitionValues": {"date": part}, "size": 200_000 + (i * 7919) % 3_000_000,
                                             "modificationTime": now - 86_400_000, "dataChange": True,
                                             "stats": json.dumps(stats)}}))
        lines.append(json.dumps({"commitInfo": {"timestamp": now, "operation": "WRITE"}}))
        (log / f"{version:020d}.json").write_text("\n".join(lines) + "\n")
    from deltalake import DeltaTable

    DeltaTable(str(path)).create_checkpoint()


BARE = """
import sys, time, resource
t0 = time.perf_counter()
import pyarrow as pa
from deltalake import DeltaTable
dt = DeltaTable(sys.argv[1])
t = pa.table(dt.get_add_actions(flatten=True))
print(t.num_rows, time.perf_counter() - t0, resource.getrusage(resource.RUSAGE_SELF).ru_maxrss)
"""

PLAN = """
import sys, time, resource, datetime as dt
t0 = time.perf_counter()
from compactor.tasks.plan import build_plan
from compactor.tasks.plan_file import write_plan
from compactor.policy.model import TablePolicy, Compaction
from compactor.project.model import Target
from compactor.formats.delta.read.state import read_delta_state
from compactor.models.table import TableLocation
state = read_delta_state(TableLocation(sys.argv[1]))
policy = TablePolicy(name="t", path=sys.argv[1], compaction=Compaction(target_file_size=128 * 2**20, min_file_size=2**20))
plan = build_plan([policy], {"t": state}, now=dt.datetime.now(dt.timezone.utc), target=Target(), project_name="bench")
write_plan(plan, sys.argv[2])
a = plan.tables[0]
print(state.file_count, time.perf_counter() - t0, resource.getrusage(resource.RUSAGE_SELF).ru_maxrss,
      len(a.actions), sum(x.input_files for x in a.actions))
"""


def run(code: str, *args: str, allocator_conf: str | None = None) -> list[float]:
    """The numbers the snippet prints, then the whole process's wall time (start-up included)."""
    env = {k: v for k, v in os.environ.items() if k != "_RJEM_MALLOC_CONF"}
    if allocator_conf:
        env["_RJEM_MALLOC_CONF"] = allocator_conf
    t0 = time.perf_counter()
    out = subprocess.run([sys.executable, "-c", code, *args], capture_output=True, text=True, check=True, env=env)
    return [float(x) for x in out.stdout.split()] + [time.perf_counter() - t0]


def with_a_rewrite(table: Path) -> Path:
    """A copy of the synthetic table's log with one more commit: a compaction (dataChange false) of two
    files of one partition. The scan for rows live twice then parses and replays its whole window, as it
    does on any table compacted within its last 1,000 commits; on the table as built (appends only) no
    commit may be a rewrite and the window is only read (formats/delta/duplicates/detection.py, may_rewrite)."""
    path = table.with_name(table.name + "-rewrite")
    if (path / "_delta_log").exists():
        return path
    shutil.copytree(table, path)
    log = path / "_delta_log"
    first = [json.loads(line)["add"] for line in (log / f"{1:020d}.json").read_text().splitlines()[:PARTITIONS + 1]
             if line.startswith('{"add"')]
    a, b = first[0], first[PARTITIONS]  # the same partition
    now = int(time.time() * 1000)
    version = max(int(f.name[:20]) for f in log.glob("*.json")) + 1
    lines = [{"commitInfo": {"timestamp": now, "operation": "OPTIMIZE"}}]
    lines += [{"remove": {"path": f["path"], "deletionTimestamp": now, "dataChange": False,
                          "partitionValues": f["partitionValues"], "size": f["size"]}} for f in (a, b)]
    lines.append({"add": {"path": a["path"].rsplit("/", 1)[0] + "/part-compacted.c000.snappy.parquet",
                          "partitionValues": a["partitionValues"], "size": a["size"] + b["size"],
                          "modificationTime": now, "dataChange": False, "stats": json.dumps({"numRecords": 2000})}})
    (log / f"{version:020d}.json").write_text("\n".join(json.dumps(x) for x in lines) + "\n")
    return path


def cached_table(base: Path, n: int) -> Path:
    """The synthetic table with n files under base (PARTITIONS partitions), built once and reused."""
    path = base / (f"t{n}" if PARTITIONS == 1000 else f"t{n}-p{PARTITIONS}")
    if not (path / "_delta_log").exists():
        t0 = time.time()
        build_table(path, n)
        print(f"built {n} files in {time.time() - t0:.1f}s", file=sys.stderr)
    return path


def main() -> None:
    global PARTITIONS
    ap = argparse.ArgumentParser()
    ap.add_argument("--sizes", default="10000,100000,1000000")
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--dir", default="/tmp/compactor-plan-scale")
    ap.add_argument("--partitions", type=int, default=1000, help="partitions of the synthetic table")
    args = ap.parse_args()
    PARTITIONS = args.partitions
    base = Path(args.dir)
    rows = []
    for n in [int(s) for s in args.sizes.split(",")]:
        path = cached_table(base, n)
        bare, tuned, plan = [], [], []
        for _ in range(args.repeat):  # alternate, side by side
            bare.append(run(BARE, str(path)))
            # the same jemalloc setting compactor applies (read_delta_state), for a like-for-like load
            tuned.append(run(BARE, str(path), allocator_conf=JEMALLOC_CONF))
            plan.append(run(PLAN, str(path), str(base / f"plan{n}.json")))
        b_t, t_t, p_t = (statistics.median(x[1] for x in xs) for xs in (bare, tuned, plan))
        b_w, p_w = statistics.median(x[-1] for x in bare), statistics.median(x[-1] for x in plan)
        b_rss, t_rss, p_rss = (max(x[2] for x in xs) / 1024 for xs in (bare, tuned, plan))
        rows.append((n, b_t, t_t, p_t, p_t / b_t, p_t / t_t, b_rss, t_rss, p_rss, int(plan[0][3]), int(plan[0][4]),
                     os.path.getsize(base / f"plan{n}.json") / 2**20, b_w, p_w))
    print("| files | bare load (s) | bare, same allocator (s) | compactor plan (s) | ratio vs bare | ratio vs same allocator "
          "| bare RSS (MiB) | bare, same allocator RSS (MiB) | plan RSS (MiB) | actions | files planned | plan.json (MiB) "
          "| whole process: bare (s) | whole process: plan (s) | whole-process ratio |")
    print("|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|")
    for r in rows:
        print(f"| {r[0]:,} | {r[1]:.2f} | {r[2]:.2f} | {r[3]:.2f} | {r[4]:.2f}x | {r[5]:.2f}x | {r[6]:.0f} | {r[7]:.0f} "
              f"| {r[8]:.0f} | {r[9]} | {r[10]:,} | {r[11]:.1f} | {r[12]:.2f} | {r[13]:.2f} | {r[13] / r[12]:.2f}x |")


if __name__ == "__main__":
    main()
