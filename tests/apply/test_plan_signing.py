"""Signed plans for deploy pipelines: `plan --sign`, `apply --require-signature` (issue 18)."""

from __future__ import annotations

import json
from pathlib import Path

from click.testing import CliRunner

from compactor.cli import cli
from compactor.planning.plan import plan_digest
from tests.apply.helpers import ids, make_table, one_table_project

KEY = "a-deploy-pipelines-secret"


def _run(*args: str, key: str | None = KEY):
    env = {"COMPACTOR_PLAN_KEY": key} if key is not None else {"COMPACTOR_PLAN_KEY": ""}
    return CliRunner().invoke(cli, list(args), env=env, catch_exceptions=False)


def _setup(tmp_path: Path) -> tuple[Path, Path, Path]:
    t = tmp_path / "lake" / "t"
    make_table(t, partitions=2, appends=3, rows=5)
    p = one_table_project(tmp_path / "proj", t)
    return t, p, p / "target" / "plan.json"


def test_a_signed_plan_applies_and_the_key_is_in_no_artifact(tmp_path: Path) -> None:
    t, p, plan = _setup(tmp_path)
    assert _run("plan", "--project-dir", str(p), "--sign").exit_code == 0
    doc = json.loads(plan.read_text())
    assert doc["signature"].startswith("hmac-sha256:")
    r = _run("apply", str(plan), "--project-dir", str(p), "--require-signature")
    assert r.exit_code == 0, r.output
    assert sorted(ids(t)) == list(range(30))
    for f in [*(p / "target").rglob("*"), *(t / "_compactor").rglob("*")]:
        if f.is_file():
            assert KEY.encode() not in f.read_bytes(), f


def test_unsigned_wrong_key_and_re_signed_edits_are_refused(tmp_path: Path) -> None:
    t, p, plan = _setup(tmp_path)
    assert _run("plan", "--project-dir", str(p)).exit_code == 0
    r = _run("apply", str(plan), "--project-dir", str(p), "--require-signature")
    assert r.exit_code == 2 and "is not signed" in r.output
    assert _run("plan", "--project-dir", str(p), "--sign").exit_code == 0
    r = _run("apply", str(plan), "--project-dir", str(p), "--require-signature", key="another-key")
    assert r.exit_code == 2 and "not signed with this key" in r.output
    doc = json.loads(plan.read_text())  # an edit with the digest recomputed: the signature no longer fits
    doc["tables"][0]["actions"][0]["reason"] = "edited"
    doc.pop("digest")
    doc["digest"] = plan_digest(doc)
    plan.write_text(json.dumps(doc))
    r = _run("apply", str(plan), "--project-dir", str(p), "--require-signature")
    assert r.exit_code == 2 and "not signed with this key" in r.output
    r = _run("apply", str(plan), "--project-dir", str(p), "--require-signature", key=None)
    assert r.exit_code == 2 and "COMPACTOR_PLAN_KEY" in r.output
    assert not (t / "_compactor").exists()
