"""Documents already validated clean are not validated (nor jsonschema imported) again; any change is."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

PROBE = """
import sys
from compactor import api
from compactor.project.model import ProjectOptions
r = api.validate(ProjectOptions(project_dir=sys.argv[1]))
print(r.ok, 'jsonschema' in sys.modules)
"""


def _validate(project: Path, cache: Path) -> str:
    env = {**os.environ, "COMPACTOR_CACHE_DIR": str(cache)}
    return subprocess.run([sys.executable, "-c", PROBE, str(project)], capture_output=True, text=True, env=env,
                          check=True).stdout.strip()


def test_unchanged_policies_skip_jsonschema_and_a_change_is_validated(tmp_path: Path) -> None:
    p = tmp_path / "proj"
    (p / "policies").mkdir(parents=True)
    (p / "compactor.yml").write_text("name: p\n")
    policy = p / "policies" / "t.yml"
    policy.write_text("version: 1\ntables:\n  - name: t\n    path: /lake/t\n")
    cache = tmp_path / "cache"
    assert _validate(p, cache) == "True True"    # first time: validated
    assert _validate(p, cache) == "True False"   # unchanged: remembered, jsonschema never imported
    policy.write_text("version: 1\ntables:\n  - name: t\n    path: /lake/t\n    colour: blue\n")
    assert _validate(p, cache) == "False True"   # changed and invalid: validated, and never remembered
    assert _validate(p, cache) == "False True"
