"""The package's data flows one way (docs/architecture.md): no import cycle between its top-level packages,
and planning/ is pure (no I/O module, no engine, no format)."""

from __future__ import annotations

import ast
from collections import defaultdict
from pathlib import Path

PACKAGE = Path(__file__).resolve().parents[1] / "compactor"

#: layers may import only these compactor packages (besides themselves and the shared modules)
SHARED = {"errors", "units", "__init__", "models"}
ALLOWED = {
    "planning": {"policy"},
    "models": set(),
    "policy": set(),
    "runtime": set(),
    "engines": {"runtime", "project"},
    "formats": {"engines", "planning", "runtime", "policy", "project"},
    "project": {"policy"},
    "output": {"planning", "policy", "project"},
}
#: modules planning/ must never import, directly or lazily: it only computes
IMPURE = ("os", "pathlib", "shutil", "subprocess", "socket", "threading", "deltalake", "pyspark", "obstore",
          "pyarrow.parquet", "pyarrow.fs", "pyarrow.dataset", "compactor.formats", "compactor.engines",
          "compactor.runtime", "compactor.tasks")


def _imports(path: Path) -> list[str]:
    """Every module a file imports, at module level or inside functions (relative imports resolved)."""
    tree = ast.parse(path.read_text(encoding="utf-8"))
    parts = path.relative_to(PACKAGE.parent).with_suffix("").parts
    out = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            out += [a.name for a in node.names]
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = ".".join(parts[: len(parts) - node.level])
                out.append(f"{base}.{node.module}" if node.module else base)
            elif node.module:
                out.append(node.module)
                out += [f"{node.module}.{a.name}" for a in node.names]
    return out


def _package_of(module: str) -> str | None:
    bits = module.split(".")
    if bits[0] != "compactor":
        return None
    if len(bits) == 1:
        return "__init__"
    return bits[1].removesuffix(".py")


def _graph() -> dict[str, set[str]]:
    graph: dict[str, set[str]] = defaultdict(set)
    for f in PACKAGE.rglob("*.py"):
        rel = f.relative_to(PACKAGE).parts
        src = rel[0].removesuffix(".py") if len(rel) > 1 or rel[0] != "__init__.py" else "__init__"
        for m in _imports(f):
            dst = _package_of(m)
            if dst and dst != src:
                graph[src].add(dst)
    return graph


def test_no_import_cycle_between_packages() -> None:
    graph = _graph()
    state: dict[str, int] = {}
    stack: list[str] = []

    def visit(node: str) -> None:
        state[node] = 1
        stack.append(node)
        for nxt in sorted(graph.get(node, ())):
            if nxt in SHARED:
                continue
            if state.get(nxt) == 1:
                cycle = stack[stack.index(nxt):] + [nxt]
                raise AssertionError("package import cycle: " + " -> ".join(cycle))
            if nxt not in state:
                visit(nxt)
        stack.pop()
        state[node] = 2

    for node in sorted(graph):
        if node not in state:
            visit(node)


def test_each_layer_imports_only_the_layers_below_it() -> None:
    graph = _graph()
    wrong = {src: sorted(dst - ALLOWED[src] - SHARED) for src, dst in graph.items() if src in ALLOWED}
    assert not {k: v for k, v in wrong.items() if v}, wrong


def test_planning_is_pure() -> None:
    found = {}
    for f in (PACKAGE / "planning").rglob("*.py"):
        bad = [m for m in _imports(f) if any(m == i or m.startswith(i + ".") for i in IMPURE)]
        if bad:
            found[f.name] = bad
    assert not found, found


def test_the_checks_see_imports_at_every_depth() -> None:
    """The harness itself: a function-local import is found, and a cycle would be reported."""
    imports = _imports(PACKAGE / "tasks" / "apply.py")
    assert "compactor.project.compile" in imports  # imported inside apply_project
    assert "formats" in _graph()["tasks"]


def test_run_results_know_the_rewrite_action_types() -> None:
    from compactor.models.results import REWRITE_TYPES
    from compactor.planning.actions import REWRITE_ACTIONS

    assert REWRITE_TYPES == REWRITE_ACTIONS
