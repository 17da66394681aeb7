"""compactor on a 20,000-file Delta table on the S3 emulator (moto, loopback), against bare delta-rs.

- plan: ``python -m compactor plan`` (read the table, plan, write plan.json) vs a bare delta-rs load of
  the same table (``DeltaTable(uri, storage_options)`` + ``get_add_actions(flatten=True)``).
- apply: ``python -m compactor apply plan.json`` (local engine) vs a bare ``DeltaTable.optimize.compact()``
  with the same target size.

Whole processes (interpreter start included), the two sides alternating (the first side switches every
repetition), median of ``--repeat`` runs. Apply changes the table, so before every apply run the table is
reset to the state it was built in: the commits and data files written since are deleted and
``_last_checkpoint`` is restored (compaction only adds files, so the original data files are all still
there). The table is built fast: parquet files are generated in memory and uploaded in parallel, then
committed with a few large ``create_write_transaction`` calls.

    python bench/objectstore_scale.py [--files 20000] [--partitions 20] [--repeat 3] [--skip-apply]
"""

from __future__ import annotations

import argparse
import io
import json
import os
import statistics
import subprocess
import sys
import tempfile
import textwrap
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import pyarrow as pa  # noqa: E402
import pyarrow.parquet as pq  # noqa: E402

from compactor.runtime.storage import Storage  # noqa: E402
from tests.objectstore.servers import start_s3  # noqa: E402

ROWS = 20
TARGET = 64 * 2**20
COMMIT_CHUNK = 5_000

BARE_LOAD = textwrap.dedent("""
    import json, sys
    import pyarrow as pa
    from deltalake import DeltaTable
    dt = DeltaTable(sys.argv[1], storage_options=json.loads(sys.argv[2]))
    t = pa.table(dt.get_add_actions(flatten=True))
    assert t.num_rows > 0
""")

#: the plan comparison inside one warm process (imports and interpreter start excluded): what reading and
#: planning a table on the store costs compactor beyond delta-rs' own load
IN_PROCESS = textwrap.dedent("""
    import datetime as dt, json, statistics, sys, time
    import pyarrow as pa
    from deltalake import DeltaTable
    from compactor.formats.delta.read.state import read_delta_state
    from compactor.models.table import TableLocation
    from compactor.policy.model import Compaction, TablePolicy, Triggers
    from compactor.project.model import Target
    from compactor.tasks.plan import build_plan
    from compactor.tasks.plan_file import write_plan
    uri, so, out, repeat = sys.argv[1], json.loads(sys.argv[2]), sys.argv[3], int(sys.argv[4])
    policy = TablePolicy(name="t", path=uri, compaction=Compaction(target_file_size=%d, min_file_size=%d,
                                                                   triggers=Triggers(min_input_files=2)))
    bare, ours = [], []
    for i in range(repeat):
        t0 = time.perf_counter()
        pa.table(DeltaTable(uri, storage_options=so).get_add_actions(flatten=True))
        bare.append(time.perf_counter() - t0)
        t0 = time.perf_counter()
        state = read_delta_state(TableLocation(uri, so))
        plan = build_plan([policy], {"t": state}, now=dt.datetime.now(dt.timezone.utc),
                          target=Target(storage_options=so), project_name="bench")
        write_plan(plan, out)
        ours.append(time.perf_counter() - t0)
    print(json.dumps({"bare": statistics.median(bare), "compactor": statistics.median(ours)}))
""" % (TARGET, TARGET // 2))

BARE_COMPACT = textwrap.dedent("""
    import json, sys
    from deltalake import DeltaTable
    dt = DeltaTable(sys.argv[1], storage_options=json.loads(sys.argv[2]))
    m = dt.optimize.compact(target_size=int(sys.argv[3]))
    assert m["numFilesRemoved"] > 0, m
""")


def build(uri: str, so: dict[str, str], files: int, partitions: int) -> float:
    """A partitioned table of ``files`` small parquet files on the store; returns seconds taken."""
    from deltalake import DeltaTable
    from deltalake.transaction import AddAction

    t0 = time.perf_counter()
    schema = pa.schema([("part", pa.string()), ("id", pa.int64()), ("v", pa.float64())])
    DeltaTable.create(uri, schema, partition_by=["part"], storage_options=so)
    st = Storage(uri, so)
    now = int(time.time() * 1000)

    def one(i: int) -> AddAction:
        part = f"p{i % partitions:02d}"
        ids = pa.array(range(i * ROWS, (i + 1) * ROWS), pa.int64())
        buf = io.BytesIO()
        pq.write_table(pa.table({"id": ids, "v": pa.array([float(x) for x in range(ROWS)])}), buf)
        rel = f"part={part}/part-{i:06d}-bench.c000.snappy.parquet"
        data = buf.getvalue()
        st.write_bytes(rel, data)
        stats = {"numRecords": ROWS, "minValues": {"id": i * ROWS, "v": 0.0},
                 "maxValues": {"id": (i + 1) * ROWS - 1, "v": float(ROWS - 1)}, "nullCount": {"id": 0, "v": 0}}
        return AddAction(rel, len(data), {"part": part}, now, True, json.dumps(stats))

    with ThreadPoolExecutor(16) as pool:
        adds = list(pool.map(one, range(files)))
    dt = DeltaTable(uri, storage_options=so)
    for i in range(0, len(adds), COMMIT_CHUNK):
        dt.create_write_transaction(adds[i:i + COMMIT_CHUNK], mode="append", schema=dt.schema(), partition_by=["part"])
    return time.perf_counter() - t0


class Snapshot:
    """The table as built: reset() deletes what later runs added and restores _last_checkpoint."""

    def __init__(self, st: Storage) -> None:
        self.st = st
        self.paths = {o.path for o in st.list()}
        self.last_checkpoint = st.read_bytes("_delta_log/_last_checkpoint") if st.exists(
            "_delta_log/_last_checkpoint") else None

    def reset(self) -> int:
        extra = [o.path for o in self.st.list() if o.path not in self.paths]
        for p in extra:
            self.st.delete(p)
        if self.last_checkpoint is None:
            self.st.delete("_delta_log/_last_checkpoint")
        else:
            self.st.write_bytes("_delta_log/_last_checkpoint", self.last_checkpoint)
        return len(extra)


def make_project(root: Path, uri: str, so: dict[str, str]) -> Path:
    (root / "policies").mkdir(parents=True, exist_ok=True)
    (root / "compactor.yml").write_text("name: bench\nprofile: bench\n")
    opts = "".join(f'        {k}: "{v}"\n' for k, v in so.items())
    (root / "profiles.yml").write_text(f"bench:\n  target: s3\n  outputs:\n    s3:\n      engine: local\n"
                                       f"      storage_options:\n{opts}")
    (root / "policies" / "t.yml").write_text(
        f"version: 1\ntables:\n  - name: t\n    path: {uri}\n    compaction:\n"
        f"      target_file_size: {TARGET}\n      triggers: {{min_input_files: 2}}\n")
    return root


def timed(cmd: list[str], env: dict[str, str]) -> float:
    t0 = time.perf_counter()
    r = subprocess.run(cmd, capture_output=True, text=True, env=env)
    elapsed = time.perf_counter() - t0
    if r.returncode != 0:
        raise SystemExit(f"failed: {' '.join(cmd[:4])}...\n{r.stdout[-2000:]}\n{r.stderr[-3000:]}")
    return elapsed


def alternate(sides: dict[str, list[str]], repeat: int, env: dict[str, str], before=None) -> dict[str, list[float]]:
    times: dict[str, list[float]] = {k: [] for k in sides}
    names = list(sides)
    for i in range(repeat):
        for name in names if i % 2 == 0 else names[::-1]:
            if before is not None:
                before()
            times[name].append(timed(sides[name], env))
            print(f"  {name}: {times[name][-1]:.2f}s", file=sys.stderr, flush=True)
    return times


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--files", type=int, default=20_000)
    ap.add_argument("--partitions", type=int, default=20)
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--skip-apply", action="store_true")
    args = ap.parse_args()
    server = start_s3()
    os.environ.update(server.env)
    env = {**os.environ, **server.env}
    try:
        so = dict(server.storage_options)
        uri = server.uri("bench/t")
        built = build(uri, so, args.files, args.partitions)
        st = Storage(uri, so)
        snap = Snapshot(st)
        print(f"built {args.files} files in {args.partitions} partitions in {built:.0f}s "
              f"({len(snap.paths)} objects)", file=sys.stderr, flush=True)
        work = Path(tempfile.mkdtemp(prefix="compactor-os-bench-"))
        proj = make_project(work / "proj", uri, so)
        plan_file = work / "plan.json"
        py = sys.executable
        print("plan vs bare load", file=sys.stderr)
        plan_t = alternate({"compactor plan": [py, "-m", "compactor", "plan", "--project-dir", str(proj),
                                               "--out", str(plan_file)],
                            "bare load": [py, "-c", BARE_LOAD, uri, json.dumps(so)]}, args.repeat, env)
        rows = [("plan vs bare delta-rs load", plan_t["compactor plan"], plan_t["bare load"])]
        r = subprocess.run([py, "-c", IN_PROCESS, uri, json.dumps(so), str(work / "plan-ip.json"),
                            str(max(3, args.repeat))], capture_output=True, text=True, env=env, check=True)
        ip = json.loads(r.stdout.strip().splitlines()[-1])
        rows.append(("plan vs bare load, inside one warm process", [ip["compactor"]], [ip["bare"]]))
        if not args.skip_apply:
            print("apply vs bare optimize.compact", file=sys.stderr)
            subprocess.run([py, "-m", "compactor", "plan", "--project-dir", str(proj), "--out", str(plan_file)],
                           check=True, capture_output=True, env=env)
            plan = json.loads(plan_file.read_text())
            n_actions = len(plan["tables"][0]["actions"])
            apply_t = alternate({"compactor apply": [py, "-m", "compactor", "apply", str(plan_file), "--project-dir",
                                                     str(proj)],
                                 "bare optimize.compact": [py, "-c", BARE_COMPACT, uri, json.dumps(so), str(TARGET)]},
                                args.repeat, env, before=snap.reset)
            snap.reset()
            rows.append((f"apply ({n_actions} actions) vs bare optimize.compact", apply_t["compactor apply"],
                         apply_t["bare optimize.compact"]))
        print(f"\n{args.files} files, {args.partitions} partitions, moto S3 on loopback, median of {args.repeat}\n")
        print("| comparison | compactor (s) | bare delta-rs (s) | ratio | runs (compactor / bare) |")
        print("|---|---:|---:|---:|---|")
        for name, ours, raw in rows:
            mo, mr = statistics.median(ours), statistics.median(raw)
            print(f"| {name} | {mo:.2f} | {mr:.2f} | {mo / mr:.2f}x | "
                  f"{', '.join(f'{x:.1f}' for x in ours)} / {', '.join(f'{x:.1f}' for x in raw)} |")
    finally:
        server.stop()
        if "work" in locals():
            import shutil

            shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()
