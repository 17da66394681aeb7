"""`compactor demo`: build a small lake full of small files, then validate, plan and apply it.

The lake holds one demo table per format that offers one (``TableFormat.demo``: compactor/formats/demo.py),
in the registry's order; a format's switch leaves its table out, and a table that cannot be built here
(what it needs is missing) is noted and left out, with its policies."""

from __future__ import annotations

import shutil
from collections.abc import Callable
from dataclasses import dataclass, field
from importlib import resources
from pathlib import Path
from typing import TYPE_CHECKING

from compactor.errors import UsageError
from compactor.formats import FORMAT_NAMES, get_format
from compactor.models.demo import DemoSwitch, TableSnapshot

if TYPE_CHECKING:  # pragma: no cover
    from compactor.formats.demo import DemoTable

__all__ = ["DemoLake", "TableSnapshot", "build_demo", "demo_snapshots", "demo_switches"]

MARKER = ".compactor-demo"
#: the example project's files every demo writes (each demo table adds its policies)
PROJECT_FILES = ("compactor.yml", "profiles.yml")


@dataclass
class DemoLake:
    """What ``build_demo`` wrote: the folder (also the project's), the tables by name, and notes."""

    root: Path
    project_dir: Path
    tables: dict[str, str] = field(default_factory=dict)
    notes: list[str] = field(default_factory=list)


def prepare_dir(directory: Path) -> None:
    if directory.exists() and any(directory.iterdir()):
        if not (directory / MARKER).exists():
            raise UsageError(f"{directory} exists and was not created by `compactor demo`",
                             hint="pass an empty or new directory")
        shutil.rmtree(directory)
    directory.mkdir(parents=True, exist_ok=True)
    (directory / MARKER).write_text("created by compactor demo; safe to delete\n")


def demo_tables() -> list[DemoTable]:
    """The demo table of each registered format that offers one, in the registry's order."""
    return [t for name in FORMAT_NAMES if (t := get_format(name).demo) is not None]


def demo_switches() -> list[DemoSwitch]:
    """What can leave a demo table out (`compactor demo --no-<word>`, ``with_<word>=False``)."""
    return [t.switch for t in demo_tables() if t.switch is not None]


def write_project(project_dir: Path, lake: Path, policy_files: tuple[str, ...]) -> None:
    """The example project for the demo lake, with the policies of the tables that were built (a table
    that could not be built has none: a policy for a missing table would fail every plan of the project)."""
    src = resources.files("compactor").joinpath("example_project")
    for rel in PROJECT_FILES + policy_files:
        text = src.joinpath(rel).read_text(encoding="utf-8")
        if rel == "compactor.yml":
            text = text.replace("lake_root: ./compactor-demo/lake", f"lake_root: {lake.as_posix()}")
        dst = project_dir / rel
        dst.parent.mkdir(parents=True, exist_ok=True)
        dst.write_text(text, encoding="utf-8")


def build_demo(directory: Path, *, say: Callable[[str], None] = lambda s: None, **switches: bool) -> DemoLake:
    """The demo lake and its project in ``directory``. ``switches``: ``with_<word>=False`` leaves out the
    demo table of that switch (``demo_switches``); an unknown one is a UsageError."""
    tables = demo_tables()
    known = {f"with_{t.switch.word}" for t in tables if t.switch is not None}
    unknown = sorted(set(switches) - known)
    if unknown:
        raise UsageError(f"unknown demo switch {', '.join(unknown)}", hint=f"known: {', '.join(sorted(known))}")
    directory = Path(directory)
    prepare_dir(directory)
    lake = directory / "lake"
    demo = DemoLake(root=directory, project_dir=directory)
    policy_files: tuple[str, ...] = ()
    for table in tables:
        if table.switch is not None and not switches.get(f"with_{table.switch.word}", True):
            continue
        why = table.unavailable()
        if why is not None:
            demo.notes.append(why)
            continue
        table.build(lake / table.name, say)
        demo.tables[table.name] = str(lake / table.name)
        policy_files += table.policy_files
    write_project(directory, lake.resolve(), policy_files)
    return demo


def demo_snapshots(demo: DemoLake) -> dict[str, TableSnapshot]:
    """Each table of ``demo`` its format shows a before/after of, by name, as it is now."""
    out = {}
    for table in demo_tables():
        if table.name in demo.tables and (snap := table.snapshot(demo.tables[table.name])) is not None:
            out[table.name] = snap
    return out
