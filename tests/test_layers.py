"""The package's data flows one way (docs/architecture.md): no import cycle between its top-level packages,
and planning/ is pure (no I/O module, no engine, no format)."""

from __future__ import annotations

import ast
from collections import defaultdict
from pathlib import Path

PACKAGE = Path(__file__).resolve().parents[1] / "compactor"

#: layers may import only these compactor packages (besides themselves and the shared modules)
SHARED = {"errors", "units", "__init__", "__version__", "models"}
ALLOWED = {
    "planning": {"policy"},
    "models": set(),
    "policy": set(),
    "runtime": set(),
    "engines": {"runtime", "project"},
    "formats": {"engines", "planning", "runtime", "policy", "project"},
    "catalogs": {"runtime", "engines", "project"},
    "project": {"policy"},
    "output": {"planning", "policy", "project", "runtime"},
    # data flows cli -> api -> tasks -> formats -> engines/planning/runtime (docs/architecture.md)
    "tasks": {"formats", "catalogs", "engines", "planning", "policy", "project", "runtime", "output"},
    "api": {"tasks", "project", "planning", "policy"},
    "cli": {"api", "output", "project", "policy", "planning", "runtime"},
}
#: modules planning/ must never import, directly or lazily: it only computes
IMPURE = ("os", "pathlib", "shutil", "subprocess", "socket", "threading", "deltalake", "pyspark", "obstore",
          "pyarrow.parquet", "pyarrow.fs", "pyarrow.dataset", "compactor.formats", "compactor.catalogs", "compactor.engines",
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


def test_run_totals_count_the_bytes_of_every_registered_rewrite() -> None:
    """Run results name no action type: the bytes a run rewrote are those of the types the registry says
    rewrite data files, a format's own included, and of no other type."""
    from compactor.models.results import ActionResult, compute_run_totals
    from compactor.planning.vocabulary import action_classes, rewrite_types

    rewrites = {c.type: c.rewrites for c in action_classes()}
    assert {t for t, r in rewrites.items() if r} == {"compact", "z_order", "sort", "sink_compact", "purge"}
    results = [ActionResult("t", t, bytes_removed=1) for t in rewrites]
    assert compute_run_totals(results, rewrite_types()).bytes_rewritten == 5


def _own_imports(module: str, package: str, seen: set[str]) -> list[str]:
    """Every module ``module`` imports, and those its imports from ``package`` import, transitively."""
    if module in seen:
        return []
    seen.add(module)
    f = PACKAGE.parent / (module.replace(".", "/") + ".py")
    if not f.is_file():
        return []
    out = []
    for m in _imports(f):
        out.append(m)
        if m.startswith(package + ".") and m != package + ".":
            out += _own_imports(m, package, seen)
    return out


def test_each_formats_plan_words_are_pure() -> None:
    """planning/ imports a format's plan words (FormatSpec.actions) when it meets one: that module, and
    what it imports from its own folder, do no I/O, as planning/ itself."""
    from compactor.models.formats import FORMATS

    found = {}
    for spec in FORMATS:
        own = spec.module  # the format's folder: its pure modules are checked in turn
        bad = [m for m in _own_imports(spec.actions, own, set()) if not m.startswith(own + ".")
               and any(m == i or m.startswith(i + ".") for i in IMPURE)]
        if bad:
            found[spec.actions] = bad
    assert not found, found
    assert _own_imports("compactor.formats.delta.plan.actions", "compactor.formats.delta", set())  # the harness reads it


#: the largest a module under compactor/ may grow
MAX_MODULE_LINES = 400


def _py_files() -> list[Path]:
    return sorted(f for f in PACKAGE.rglob("*.py") if "__pycache__" not in f.parts)


def test_no_module_over_400_lines() -> None:
    big = {str(f.relative_to(PACKAGE)): n for f in _py_files()
           if (n := len(f.read_text(encoding="utf-8").splitlines())) > MAX_MODULE_LINES}
    assert not big, f"split these modules (at most {MAX_MODULE_LINES} lines): {big}"


def _calls(tree: ast.AST, name: str) -> list[int]:
    return [n.lineno for n in ast.walk(tree)
            if isinstance(n, ast.Call) and isinstance(n.func, ast.Name) and n.func.id == name]


def test_capabilities_are_types_not_hasattr() -> None:
    """What an engine or a format can do is a Protocol or an attribute (SqlEngine, TableFormat.duplicates),
    never probed with hasattr."""
    found = {str(f.relative_to(PACKAGE)): lines for f in _py_files()
             if (lines := _calls(ast.parse(f.read_text(encoding="utf-8")), "hasattr"))}
    assert not found, found


#: each format's own package under formats/ (delta, file_sink, ...): named only inside formats/
FORMAT_PACKAGES = {d.name for d in (PACKAGE / "formats").iterdir() if (d / "__init__.py").is_file()}


def _format_names() -> set[str]:
    from compactor.models.formats import FORMATS

    return {*(f.name for f in FORMATS), *(m for f in FORMATS for m in f.metadata)}


def _format_branches(f: Path, names: set[str]) -> list[str]:
    """Imports of a format's own package and comparisons with a format's name or metadata folder."""
    tree = ast.parse(f.read_text(encoding="utf-8"))
    out = sorted({f"imports {m}" for m in _imports(f)
                  if m.startswith("compactor.formats.") and m.split(".")[2] in FORMAT_PACKAGES})
    for node in ast.walk(tree):
        if isinstance(node, ast.Compare):
            consts = [c.value for c in [node.left, *node.comparators] if isinstance(c, ast.Constant)]
            out += [f"line {node.lineno}: compares with {c!r}" for c in consts if c in names]
        elif isinstance(node, ast.Dict):
            out += [f"line {node.lineno}: keyed by {k.value!r}" for k in node.keys
                    if isinstance(k, ast.Constant) and k.value in names]
    return out


def test_no_format_branch_outside_formats() -> None:
    """Only formats/ knows which formats exist: tasks, api and the CLI go through get_format and the
    TableFormat interface (a third format is a new folder under formats/ plus its registry line)."""
    names = _format_names()
    found = {}
    for f in _py_files():
        rel = f.relative_to(PACKAGE)
        if rel.parts[0] == "formats":
            continue
        branches = _format_branches(f, names)
        if branches:
            found[str(rel)] = branches
    assert not found, found


def test_the_format_branch_check_sees_a_branch(tmp_path: Path) -> None:
    """The harness itself: a comparison with a format name and an import of a format's package are found."""
    f = PACKAGE / "tasks" / "_probe_layers.py"
    try:
        f.write_text('from compactor.formats.delta.plan.planner import plan_delta_table\n'
                     'def kind(p):\n    return p.format == "spark_file_sink"\n')
        found = _format_branches(f, _format_names())
    finally:
        f.unlink()
    assert any("imports compactor.formats.delta.plan.planner" in b for b in found), found
    assert any("'spark_file_sink'" in b for b in found), found


def test_each_format_object_matches_its_registry_line() -> None:
    from compactor.formats import get_format
    from compactor.models.formats import FORMATS

    for spec in FORMATS:
        assert get_format(spec.name).name == spec.name


def _module_name(path: Path) -> str:
    parts = path.relative_to(PACKAGE.parent).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def _module_graph() -> dict[str, set[str]]:
    """Module -> the compactor modules it imports, at any depth of the file (also lazily, also for typing
    only: a circle a lazy import hides is still a circle of ideas)."""
    files = {_module_name(f): f for f in PACKAGE.rglob("*.py")}
    graph: dict[str, set[str]] = {}
    for name, f in files.items():
        found = set(_imports(f))
        # `from package import module` imports the module; the package counts only for a name it defines
        found -= {m.rsplit(".", 1)[0] for m in found if m in files and m.rsplit(".", 1)[0] in files
                  and _only_submodules(f, m.rsplit(".", 1)[0], files)}
        graph[name] = {m for m in found if m in files and m != name}
    return graph


def _only_submodules(path: Path, package: str, files: dict[str, Path]) -> bool:
    """Whether every ``from package import ...`` in ``path`` names submodules only."""
    tree = ast.parse(path.read_text(encoding="utf-8"))
    froms = [n for n in ast.walk(tree) if isinstance(n, ast.ImportFrom) and not n.level and n.module == package]
    return all(f"{package}.{a.name}" in files for n in froms for a in n.names)


def test_no_import_circle_between_modules() -> None:
    """No two modules import each other, directly or through others (Tarjan's strongly connected
    components over every import, lazy and typing-only ones included)."""
    graph = _module_graph()
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    circles: list[list[str]] = []

    def connect(v: str) -> None:
        index[v] = low[v] = len(index)
        stack.append(v)
        on_stack.add(v)
        for w in sorted(graph[v]):
            if w not in index:
                connect(w)
                low[v] = min(low[v], low[w])
            elif w in on_stack:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            component = []
            while True:
                w = stack.pop()
                on_stack.discard(w)
                component.append(w)
                if w == v:
                    break
            if len(component) > 1:
                circles.append(sorted(component))

    for v in sorted(graph):
        if v not in index:
            connect(v)
    assert not circles, "modules that import each other: " + "; ".join(" <-> ".join(c) for c in circles)


def test_the_circle_check_sees_a_circle() -> None:
    """The check above can fail: two modules that import each other form a component of two."""
    graph = _module_graph()
    a, b = "compactor.errors", "compactor.units"
    assert b not in graph[a] or a not in graph[b]
    graph[a] = {*graph[a], b}
    graph[b] = {*graph[b], a}
    import sys
    module = sys.modules[__name__]
    original = module._module_graph
    module._module_graph = lambda: graph  # type: ignore[attr-defined]
    try:
        test_no_import_circle_between_modules()
    except AssertionError as e:
        assert "compactor.errors <-> compactor.units" in str(e)
    else:
        raise AssertionError("the circle check passed a graph with a circle")
    finally:
        module._module_graph = original  # type: ignore[attr-defined]
