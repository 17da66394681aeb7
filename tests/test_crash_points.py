"""Every crash point compactor reaches is listed with what it means (runtime/faults.POINTS, and each table
format's ``formats/<format>/faults.py``), and every listed point is reached by some code (tests arm them by
name: a listed point no code reaches would arm nothing, silently)."""

from __future__ import annotations

import ast
from importlib import import_module
from pathlib import Path

from compactor.models.formats import FORMATS
from compactor.runtime.faults import POINTS

PACKAGE = Path(__file__).resolve().parents[1] / "compactor"


def crash_point_calls() -> dict[str, list[str]]:
    """name -> the places (file:line) that call crash_point(name) with a literal name."""
    found: dict[str, list[str]] = {}
    for f in sorted(PACKAGE.rglob("*.py")):
        for node in ast.walk(ast.parse(f.read_text(encoding="utf-8"))):
            if isinstance(node, ast.Call) and getattr(node.func, "id", getattr(node.func, "attr", None)) == "crash_point":
                arg = node.args[0] if node.args else None
                name = arg.value if isinstance(arg, ast.Constant) and isinstance(arg.value, str) else "<not a literal>"
                found.setdefault(name, []).append(f"{f.relative_to(PACKAGE.parent)}:{node.lineno}")
    return found


def listed() -> dict[str, str]:
    """runtime's points and every format's own."""
    out = dict(POINTS)
    for spec in FORMATS:
        if (PACKAGE.parent / spec.module.replace(".", "/") / "faults.py").exists():
            out.update(import_module(f"{spec.module}.faults").CRASH_POINTS)
    return out


def test_every_crash_point_is_listed_and_every_listed_point_is_reached() -> None:
    calls = crash_point_calls()
    points = listed()
    calls.pop("name", None)  # faults.crash_point's own definition passes its parameter along, if ever
    assert calls, "no crash_point call found: the scan is broken"
    assert sorted(set(calls) - set(points)) == [], {n: calls[n] for n in set(calls) - set(points)}
    assert sorted(set(points) - set(calls)) == [], "listed but reached by no code"
