"""Report-time scalability: `collect_report` + `build_report` vs a bare deltalake get_add_actions() load.

Reuses plan_scale's synthetic log-only Delta tables (N files across 1,000 partitions; the report, like the
planner, never opens data files). Each measurement runs in a fresh subprocess (side by side, alternating),
reporting wall time inside the process (imports excluded), peak RSS and the HTML size.

    python bench/report_scale.py [--sizes 10000,100000] [--repeat 3] [--dir /tmp/compactor-plan-scale]
"""

from __future__ import annotations

import argparse
import statistics
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from plan_scale import BARE, cached_table, run  # noqa: E402

REPORT = """
import sys, time, resource
from pathlib import Path
t0 = time.perf_counter()
from compactor.api import ProjectOptions
from compactor.output.report.html import build_report
from compactor.tasks.report import collect_report
tables = collect_report(ProjectOptions(project_dir=Path(sys.argv[1])))
page = build_report(tables)
Path(sys.argv[2]).write_text(page)
print(len(tables[0].sizes_now), time.perf_counter() - t0, resource.getrusage(resource.RUSAGE_SELF).ru_maxrss,
      len(page), len(tables[0].planned))
"""


def make_project(base: Path, table: Path, n: int) -> Path:
    p = base / f"proj{n}"
    (p / "policies").mkdir(parents=True, exist_ok=True)
    (p / "compactor.yml").write_text("name: bench\n")
    (p / "policies" / "t.yml").write_text(
        f"version: 1\ntables:\n  - name: t\n    path: {table}\n    compaction:\n"
        "      target_file_size: 128MiB\n      min_file_size: 1MiB\n")
    return p


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--sizes", default="10000,100000")
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--dir", default="/tmp/compactor-plan-scale")
    args = ap.parse_args()
    base = Path(args.dir)
    rows = []
    for n in [int(s) for s in args.sizes.split(",")]:
        path = cached_table(base, n)
        project = make_project(base, path, n)
        bare, report = [], []
        for _ in range(args.repeat):  # alternate, side by side
            bare.append(run(BARE, str(path)))
            report.append(run(REPORT, str(project), str(base / f"report{n}.html")))
        b_t = statistics.median(x[1] for x in bare)
        r_t = statistics.median(x[1] for x in report)
        rows.append((n, b_t, r_t, r_t / b_t, max(x[2] for x in bare) / 1024, max(x[2] for x in report) / 1024,
                     report[0][3] / 1024, int(report[0][4])))
    print("| files | bare load (s) | collect + build report (s) | ratio | bare RSS (MiB) | report RSS (MiB) "
          "| report.html (KiB) | planned partitions |")
    print("|---:|---:|---:|---:|---:|---:|---:|---:|")
    for r in rows:
        print(f"| {r[0]:,} | {r[1]:.2f} | {r[2]:.2f} | {r[3]:.2f}x | {r[4]:.0f} | {r[5]:.0f} | {r[6]:.0f} | {r[7]} |")


if __name__ == "__main__":
    main()
