"""A compactor project whose target declares the tests' SQL catalog (sqlite under tmp_path), or a REST catalog,
and a policy for one Iceberg table of it, run through the CLI in this process (click's CliRunner), as the other CLI tests do."""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from click.testing import CliRunner, Result

from compactor.cli import cli
from tests.iceberg.tables import settings

COMPACTION = "{target_file_size: 1MiB, triggers: {min_input_files: 2}}"


def profiles(tmp_path: Path, engine: str = "local", catalog: str = "cat") -> str:
    s = settings(tmp_path)
    return (f"default:\n  target: dev\n  outputs:\n    dev:\n      engine: {engine}\n      catalogs:\n"
            f"        {catalog}: {{type: sql, uri: \"{s.uri}\", warehouse: \"{s.warehouse}\"}}\n")


def rest_profiles(uri: str, engine: str = "local", catalog: str = "cat", **options: str) -> str:
    """A target whose catalog ``catalog`` is the Iceberg REST catalog at ``uri`` (and ``options``:
    ``credential``, ``warehouse``, ...)."""
    more = "".join(f", {k}: \"{v}\"" for k, v in options.items())
    return (f"default:\n  target: dev\n  outputs:\n    dev:\n      engine: {engine}\n      catalogs:\n"
            f"        {catalog}: {{type: rest, uri: \"{uri}\"{more}}}\n")


def policy(table: str, catalog: str = "cat", extra: str = "") -> str:
    return ("version: 1\ntables:\n  - name: t\n    format: iceberg\n"
            f"    catalog: {{name: {catalog}, namespace: db, table: {table}}}\n"
            f"    compaction: {COMPACTION}\n{extra}")


@dataclass
class Project:
    root: Path

    @classmethod
    def make(cls, tmp_path: Path, table: str, *, catalog: str = "cat", policy_text: str | None = None,
             profiles_text: str | None = None) -> Project:
        root = tmp_path / "proj"
        (root / "policies").mkdir(parents=True)
        (root / "compactor.yml").write_text("name: ice\n")
        (root / "profiles.yml").write_text(profiles_text if profiles_text is not None else profiles(tmp_path))
        (root / "policies" / "t.yml").write_text(policy_text if policy_text is not None else policy(table, catalog))
        return cls(root)

    def cli(self, *args: str) -> Result:
        return CliRunner().invoke(cli, [*args, "--project-dir", str(self.root)], catch_exceptions=False)

    @property
    def plan_file(self) -> Path:
        return self.root / "target" / "plan.json"

    def plan(self) -> dict[str, Any]:
        doc: dict[str, Any] = json.loads(self.plan_file.read_text())
        return doc

    def table_plan(self) -> dict[str, Any]:
        (table,) = self.plan()["tables"]
        out: dict[str, Any] = table
        return out

    def bins(self) -> list[list[str]]:
        return [list(b) for a in self.table_plan()["actions"] for b in a["bins"]]

    def results(self) -> list[dict[str, Any]]:
        found: list[dict[str, Any]] = json.loads((self.root / "target" / "run_results.json").read_text())["results"]
        return found
