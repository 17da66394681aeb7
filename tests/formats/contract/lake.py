"""One format's table in a compactor project, planned through the api (with a pinned ``now``) and applied
through the CLI in this process, with the local engine; a run killed at a crash point as a kill leaves it."""

from __future__ import annotations

import datetime as dt
import json
import shutil
import subprocess
import sys
import threading
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from click.testing import CliRunner

from compactor import api
from compactor.cli import cli
from compactor.project.model import ProjectOptions
from compactor.runtime import faults, liveness
from tests.formats.contract.adapters import Adapter, Row

#: the table every contract test starts from: (ids, group) per file, one commit each. Four small files in
#: each of two groups (a format that partitions puts each group in a partition), one file too big to compact
SMALL = 2000
FILES: tuple[tuple[range, int], ...] = (
    *((range(i * SMALL, (i + 1) * SMALL), 0) for i in range(4)),
    *((range(i * SMALL, (i + 1) * SMALL), 1) for i in range(4, 8)),
    (range(8 * SMALL, 8 * SMALL + 5000), 0),
)
#: the small files (about 430 KB) are candidates (below 768 KiB), two to a 1 MiB bin, their outputs are not
#: (about 860 KB); the big one (about 1.1 MB) never is
COMPACTION = "{target_file_size: 1MiB, triggers: {min_input_files: 2}}"


#: the threads of a run that write into its table (formats/delta/apply/rewrite.py, runtime/journal.py)
RUN_WRITERS = ("prepare-next", "journal-heartbeat")


class Killed(BaseException):
    """A simulated SIGKILL at a crash point: it unwinds past every ``except Exception``; what it leaves on
    storage is the snapshot taken at the point (``Lake.apply_killed_at``), not what cleanup did after."""


@dataclass
class Applied:
    exit_code: int
    output: str
    #: run_results.json ``results`` of the run (empty when it wrote none)
    results: list[dict[str, Any]] = field(default_factory=list)

    def statuses(self) -> list[str]:
        return [r["status"] for r in self.results]


@dataclass
class Lake:
    adapter: Adapter
    root: Path

    @property
    def table(self) -> Path:
        return self.root / "lake" / "t"

    @property
    def project(self) -> Path:
        return self.root / "proj"

    def create(self) -> None:
        self.adapter.make(self.table, FILES)
        (self.project / "policies").mkdir(parents=True)
        (self.project / "compactor.yml").write_text("name: contract\n")
        (self.project / "policies" / "t.yml").write_text(
            f"version: 1\ntables:\n  - name: t\n{self.adapter.names(self.table)}    compaction: {COMPACTION}\n"
            + self.adapter.policy)
        profiles = self.adapter.profiles(self.table)
        if profiles is not None:
            (self.project / "profiles.yml").write_text(profiles)

    def plan(self, now: dt.datetime, name: str = "plan.json") -> Path:
        out = self.project / "target" / name
        api.plan(ProjectOptions(project_dir=self.project), now=now, out=out)
        return out

    def doc(self, plan: Path) -> dict[str, Any]:
        loaded: dict[str, Any] = json.loads(plan.read_text())
        return loaded

    def actions(self, plan: Path) -> list[dict[str, Any]]:
        (table,) = self.doc(plan)["tables"]
        actions: list[dict[str, Any]] = table["actions"]
        return actions

    def bins(self, plan: Path) -> list[list[str]]:
        """Every planned bin, its files relative to the table root."""
        return [[self.adapter.rel(self.table, p) for p in b] for a in self.actions(plan) for b in a["bins"]]

    def apply(self, plan: Path) -> Applied:
        results = self.project / "target" / "run_results.json"
        results.unlink(missing_ok=True)
        r = CliRunner().invoke(cli, ["apply", str(plan), "--project-dir", str(self.project)], catch_exceptions=False)
        found = json.loads(results.read_text())["results"] if results.exists() else []
        return Applied(r.exit_code, r.output, found)

    def apply_killed_at(self, plan: Path, point: str) -> bool:
        """Apply ``plan``, killed at crash point ``point``: the table is left as it was when the run reached
        the point (a snapshot taken there), the run's lease held by a process that is gone. False when the
        run never reached the point (it then ran to its end)."""
        reached = killed_at(point, self.table, self.root / "killed", lambda: self.apply(plan))
        if reached:
            _lease_of_a_dead_process(self.table)
        return reached

    # ------------------------------------------------------------------------- what storage holds

    def rows(self) -> Counter[Row]:
        return self.adapter.rows(self.table)

    def live(self) -> frozenset[str]:
        return self.adapter.live(self.table)

    def data_on_disk(self) -> set[str]:
        """Every parquet file under the table outside hidden folders (logs, compactor's own, staging)."""
        return {p.relative_to(self.table).as_posix() for p in self.table.rglob("*.parquet")
                if not any(part.startswith(("_", ".")) for part in p.relative_to(self.table).parts)}

    def leftovers(self) -> list[str]:
        """What a run left that nothing will clean up: orphan data files, staging folders, journal entries."""
        orphans = sorted(self.data_on_disk() - self.adapter.referenced(self.table))
        staging = sorted(p.relative_to(self.table).as_posix() for p in self.table.rglob("_compactor_staging_*"))
        entries = sorted(p.name for p in (self.table / "_compactor" / "journal").glob("*.json"))
        return [*(f"orphan {p}" for p in orphans), *(f"staging {p}" for p in staging),
                *(f"journal entry {p}" for p in entries)]


def killed_at(point: str, root: Path, snapshot: Path, run: Callable[[], object]) -> bool:
    """``run()`` killed at crash point ``point``: ``root`` (what the run writes into: a table, or a catalog
    and its warehouse) is left as it was when the run reached the point (copied to ``snapshot`` there, put
    back after). False when the run never reached the point (it then ran to its end)."""
    reached: list[str] = []

    def hook(name: str) -> None:
        if name == point and not reached:
            reached.append(name)
            shutil.copytree(root, snapshot, symlinks=True,
                            ignore=shutil.ignore_patterns(".*.tmp"))  # an entry write under way
            raise Killed(name)

    previous = faults.set_hook(hook)
    before = set(threading.enumerate())
    try:
        run()
    except Killed:
        pass
    finally:
        faults.set_hook(previous)
    # a kill ends every thread of the process: wait for the run's own writers (a commit group prepared
    # in the background, a journal's heartbeat) before the table is put back as the kill left it, or
    # one finishing later writes its journal entry into the table the recovery then reads
    for thread in set(threading.enumerate()) - before:
        if thread.name in RUN_WRITERS:
            thread.join(timeout=60)
    if reached:
        shutil.rmtree(root)
        shutil.move(snapshot, root)
    return bool(reached)


def _lease_of_a_dead_process(table: Path) -> None:
    """What a SIGKILL leaves beside the snapshot: the killed run's process is gone. The lease the simulated
    kill left names this test's live process; it is rewritten to name one that provably no longer runs, as a
    killed run's lease would (runtime/liveness.py)."""
    lease = table / "_compactor" / "lease.json"
    if not lease.exists():
        return
    info = json.loads(lease.read_text())
    if info.get("identity") == liveness.identity() and not info.get("released"):
        gone = subprocess.run([sys.executable, "-c", "import os; print(os.getpid())"], capture_output=True,
                              text=True, check=True)
        pid = int(gone.stdout)
        lease.write_text(json.dumps({**info, "pid": pid, "identity": liveness.identity_of(pid)}, sort_keys=True))
