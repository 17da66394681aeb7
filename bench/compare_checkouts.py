"""Is a change slower? compactor at two checkouts side by side, against the raw engine, alternating.

Runs, in rotating order per round, on identical fresh copies of one table (bench/apply_overhead.py's build):
- `compactor plan` + `compactor apply` (local engine, whole processes) with the code of checkout A and of
  checkout B (each through PYTHONPATH, the same interpreter and packages);
- bare deltalake `optimize.compact()` on the whole table (the raw engine, for the ratio);
and `compactor plan` alone on a synthetic log of --plan-files files (bench/plan_scale.py's table) for
A, B and a bare delta-rs load, on the log as built (appends only) and with a compaction as its newest
commit (plan_scale.with_a_rewrite: the scan for rows live twice then replays its whole window). Reports medians and each checkout's ratio to the raw engine.

    git worktree add --detach /tmp/base <old-commit>
    python bench/compare_checkouts.py --a /tmp/base --b . [--files 2000] [--plan-files 100000] [--repeat 3]
"""

from __future__ import annotations

import argparse
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from apply_overhead import BARE_LOCAL, build, make_project  # noqa: E402
from plan_scale import BARE, cached_table, with_a_rewrite  # noqa: E402

PLAN_CLI = "--project-dir"


def _env(checkout: Path | None) -> dict[str, str]:
    env = {**os.environ, "COMPACTOR_WATCH_WINDOW": "0"}
    if checkout is not None:
        env["PYTHONPATH"] = str(checkout.resolve())
    return env


def _timed(cmd: list[str], env: dict[str, str]) -> float:
    t0 = time.perf_counter()
    # from a folder holding no compactor: `python -m` puts the working folder before PYTHONPATH, so from a
    # checkout both sides would run that checkout's code
    subprocess.run(cmd, check=True, capture_output=True, env=env, cwd=tempfile.gettempdir())
    return time.perf_counter() - t0


def _apply_round(side: str, checkout: Path | None, master: Path, work: Path, i: int) -> float:
    copy = work / f"{side}-{i}"
    shutil.copytree(master, copy)
    if checkout is None:
        return _timed([sys.executable, "-c", BARE_LOCAL, str(copy)], _env(None))
    proj = make_project(work / f"{side}-{i}-p", copy, "local")
    plan = proj / "target" / "plan.json"
    env = _env(checkout)
    t = _timed([sys.executable, "-m", "compactor", "plan", PLAN_CLI, str(proj), "--out", str(plan)], env)
    return t + _timed([sys.executable, "-m", "compactor", "apply", str(plan), PLAN_CLI, str(proj)], env)


def _plan_round(side: str, checkout: Path | None, table: Path, work: Path) -> float:
    if checkout is None:
        return _timed([sys.executable, "-c", BARE, str(table)], _env(None))
    proj = make_project(work / f"plan-{side}", table, "local")
    return _timed([sys.executable, "-m", "compactor", "plan", PLAN_CLI, str(proj), "--out",
                   str(work / f"plan-{side}.json")], _env(checkout))


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--a", type=Path, required=True, help="the older checkout")
    ap.add_argument("--b", type=Path, required=True, help="the newer checkout")
    ap.add_argument("--files", type=int, default=2000)
    ap.add_argument("--plan-files", type=int, default=100_000)
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--dir", default="/tmp/compactor-plan-scale")
    args = ap.parse_args()
    sides = {"A": args.a, "B": args.b, "raw": None}
    for side in (args.a, args.b):  # each side must run its own checkout's code
        where = subprocess.run([sys.executable, "-c", "import compactor; print(compactor.__file__)"], check=True,
                               capture_output=True, text=True, env=_env(side), cwd=tempfile.gettempdir()).stdout
        assert Path(where.strip()).resolve().is_relative_to(side.resolve()), f"{side} runs {where.strip()}"
    order = list(sides)
    with tempfile.TemporaryDirectory() as tmp:
        work = Path(tmp)
        master = work / "master"
        build(master, args.files)
        table = cached_table(Path(args.dir), args.plan_files)
        rewritten = with_a_rewrite(table)
        apply_t: dict[str, list[float]] = {s: [] for s in sides}
        plan_t: dict[str, list[float]] = {s: [] for s in sides}
        rewrite_t: dict[str, list[float]] = {s: [] for s in sides}
        for i in range(args.repeat):
            rot = order[i % 3:] + order[:i % 3]  # each side goes first once every three rounds
            for side in rot:
                apply_t[side].append(_apply_round(side, sides[side], master, work, i))
            for side in rot:
                plan_t[side].append(_plan_round(side, sides[side], table, work))
            for side in rot:
                rewrite_t[side].append(_plan_round(side, sides[side], rewritten, work))
    print(f"| measure | A: {args.a} | B: {args.b} | raw engine | A / raw | B / raw | B / A |")
    print("|---|---:|---:|---:|---:|---:|---:|")
    for name, t in ((f"plan + apply, {args.files:,} files (s)", apply_t),
                    (f"plan, {args.plan_files:,}-file log (s)", plan_t),
                    ("plan, the same log with a compaction as its newest commit (s)", rewrite_t)):
        a, b, r = (statistics.median(t[s]) for s in ("A", "B", "raw"))
        print(f"| {name} | {a:.2f} | {b:.2f} | {r:.2f} | {a / r:.2f}x | {b / r:.2f}x | {b / a:.2f}x |")


if __name__ == "__main__":
    main()
