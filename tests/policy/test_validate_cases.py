"""Validator behaviour as YAML case files (tests/cases/validate/*.yml), run by one harness.

Case format (one behaviour per file):

  description: what the case shows                           (required)
  files:                                                     (files written into a temp project dir)
    compactor.yml: |                                         (optional; defaults to "name: case")
      name: case
    policies/p.yml: |                                        (text; written as UTF-8)
      version: 1
      tables: ...
  binary_files:                                              (optional: raw bytes, given as latin-1 text
    policies/bad.yml: "version: 1\xff\n"                      escapes, for non-UTF-8 input)
  generate:                                                  (optional: appended to a file after `files`)
    - {file: policies/big.yml, repeat_line: "# x\n", times: 400000}
  vars: {k: v}                                               (optional ProjectOptions.vars, like --vars)
  select: ["tag:x"]                                          (optional ProjectOptions.select)
  exclude: []                                                (optional ProjectOptions.exclude)
  env: {NAME: value}                                         (optional environment variables for the run)
  expect:                                                    (the EXACT set of diagnostics; [] = none)
    - {code: min_gt_target, file: policies/p.yml, line: 5}                 (severity defaults to error)
    - {code: catalog_needs_spark, file: policies/p.yml, line: 3, col: 5, severity: warning}
  expect_ok: true|false                                      (optional; default: no error in `expect`)
  expect_error: {type: ProjectError, contains: "..."}        (instead of `expect`: validate must raise)
  xfail_reason: "..."                                        (a known compactor bug; strict xfail)

A `file` starting with "<project>/" is resolved against the temp project dir (profiles.yml diagnostics
carry the absolute path of the profiles file). Each expected diagnostic is compared as (code, file, line, col, severity); `col` is compared only
when the case gives it. Extra or missing diagnostics fail the case.
"""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml

import compactor.errors as errors
from compactor.api import ProjectOptions, validate

CASES = sorted((Path(__file__).parents[1] / "cases" / "validate").glob("*.yml"))
CASE_KEYS = {"description", "files", "binary_files", "generate", "vars", "select", "exclude", "env",
             "expect", "expect_ok", "expect_error", "xfail_reason"}
EXPECT_KEYS = {"code", "file", "line", "col", "severity"}


def load_case(path: Path) -> dict:
    case = yaml.safe_load(path.read_text(encoding="utf-8"))
    assert isinstance(case, dict), f"{path.name}: a case is a mapping"
    unknown = set(case) - CASE_KEYS
    assert not unknown, f"{path.name}: unknown case keys {sorted(unknown)}"
    assert case.get("description"), f"{path.name}: description is required"
    assert ("expect" in case) != ("expect_error" in case), f"{path.name}: give exactly one of expect / expect_error"
    for e in case.get("expect") or []:
        assert set(e) <= EXPECT_KEYS and {"code", "file", "line"} <= set(e), f"{path.name}: bad expect entry {e}"
    return case


def build_project(case: dict, root: Path) -> Path:
    files = dict(case.get("files") or {})
    files.setdefault("compactor.yml", "name: case\n")
    for rel, text in files.items():
        p = root / rel
        p.parent.mkdir(parents=True, exist_ok=True)
        p.write_bytes(text.encode("utf-8"))
    for rel, text in (case.get("binary_files") or {}).items():
        p = root / rel
        p.parent.mkdir(parents=True, exist_ok=True)
        p.write_bytes(text.encode("latin-1"))
    for g in case.get("generate") or []:
        p = root / g["file"]
        p.parent.mkdir(parents=True, exist_ok=True)
        with p.open("ab") as fh:
            fh.write((g["repeat_line"] * int(g["times"])).encode("utf-8"))
    return root


def _params():
    out = []
    for path in CASES:
        case = load_case(path)
        marks = [pytest.mark.xfail(reason=case["xfail_reason"], strict=True)] if case.get("xfail_reason") else []
        out.append(pytest.param(path, id=path.stem, marks=marks))
    return out


def actual_diagnostics(result, with_col: set) -> set:
    return {(d.code, d.file, d.line, d.col if (d.code, d.file, d.line) in with_col else None, d.severity)
            for d in result.diagnostics}


@pytest.mark.parametrize("path", _params())
def test_validate_case(path: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    case = load_case(path)
    # never pick up a developer's ~/.compactor/profiles.yml
    monkeypatch.setenv("HOME", str(tmp_path / "home"))
    for k, v in (case.get("env") or {}).items():
        monkeypatch.setenv(k, str(v))
    root = build_project(case, tmp_path / "project")
    options = ProjectOptions(project_dir=root, vars=case.get("vars") or {},
                             select=tuple(case.get("select") or ()), exclude=tuple(case.get("exclude") or ()))
    if "expect_error" in case:
        want = case["expect_error"]
        exc_type = getattr(errors, want["type"])
        with pytest.raises(exc_type) as info:
            validate(options)
        assert want.get("contains", "") in str(info.value)
        return
    result = validate(options)
    expected = set()
    with_col = set()
    for e in case["expect"] or []:
        file = e["file"].replace("<project>", str(root), 1) if e["file"].startswith("<project>/") else e["file"]
        if "col" in e:
            with_col.add((e["code"], file, e["line"]))
        expected.add((e["code"], file, e["line"], e.get("col"), e.get("severity", "error")))
    got = actual_diagnostics(result, with_col)
    detail = "\n".join(str(d) + f" <{d.severity}>" for d in result.diagnostics)
    assert got == expected, f"diagnostics differ:\n{detail}"
    want_ok = case.get("expect_ok", not any(e[4] == "error" for e in expected))
    assert result.ok is want_ok
