"""The compiler front end: project -> rendered, validated, typed policies (plus every diagnostic)."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from compactor.errors import PolicyError, ProjectError
from compactor.models.formats import format_spec
from compactor.policy.build import build_table, deep_merge
from compactor.policy.diagnostics import Diagnostic, sort_key
from compactor.policy.model import TablePolicy
from compactor.policy.render import render_tree
from compactor.policy.schema import schema_diagnostics
from compactor.policy.yamlpos import Located, YamlProblem, load_yaml
from compactor.project.loader import PROJECT_FILE, load_project, load_target, unknown_catalog
from compactor.project.model import Project, ProjectOptions, Target
from compactor.project.selection import check_selector, select_policies

POLICY_SUFFIXES = (".yml", ".yaml")


@dataclass
class ValidationResult:
    """What validation found: every diagnostic, the policies (selected and all), and the files read."""

    ok: bool
    diagnostics: list[Diagnostic] = field(default_factory=list)
    policies: tuple[TablePolicy, ...] = ()
    all_policies: tuple[TablePolicy, ...] = ()
    project: Project | None = None
    target: Target | None = None
    files: list[str] = field(default_factory=list)

    @property
    def errors(self) -> list[Diagnostic]:
        return [d for d in self.diagnostics if d.severity == "error"]

    @property
    def warnings(self) -> list[Diagnostic]:
        return [d for d in self.diagnostics if d.severity != "error"]

    def to_dict(self) -> dict[str, Any]:
        return {"ok": self.ok, "files": self.files, "tables": [p.name for p in self.policies],
                "errors": len(self.errors), "warnings": len(self.warnings),
                "diagnostics": [d.to_dict() for d in self.diagnostics]}


@dataclass
class CompiledProject:
    """A project that validated without errors: its target, the policies (selected and all), the warnings."""

    project: Project
    target: Target
    policies: tuple[TablePolicy, ...]
    all_policies: tuple[TablePolicy, ...]
    diagnostics: list[Diagnostic]


def policy_files(project: Project) -> list[Path]:
    """Every policy file under the project's policy paths. A folder that cannot be read is an error
    (ProjectError, exit 2), never skipped: a skipped folder would validate as "no policies"."""
    files: list[Path] = []
    for rel in project.policy_paths:
        base = project.root / rel
        if base.is_file():
            files.append(base)
        elif base.is_dir():
            files += _walk(base, rel)
    return files


def _walk(base: Path, rel: str) -> list[Path]:
    import os

    found: list[Path] = []

    def fail(e: OSError) -> None:
        where = Path(e.filename or base)
        raise ProjectError(f"{rel}: cannot read policy folder {where}: {e.strerror or e}",
                           hint="check the folder's permissions")

    for folder, dirs, names in os.walk(base, onerror=fail):
        dirs[:] = sorted(d for d in dirs if not d.startswith("."))
        found += [Path(folder) / n for n in names
                  if not n.startswith(".") and Path(n).suffix in POLICY_SUFFIXES and (Path(folder) / n).is_file()]
    return sorted(found)


def _load_policy_file(path: Path, rel: str, project: Project) -> tuple[Located | None, list[Diagnostic]]:
    try:
        text = path.read_text(encoding="utf-8")
    except UnicodeDecodeError:
        return None, [Diagnostic(rel, 1, 1, "not_utf8", "file is not UTF-8 text")]
    except OSError as e:
        return None, [Diagnostic(rel, 1, 1, "unreadable_file", str(e))]
    try:
        raw, dups = load_yaml(text)
    except YamlProblem as p:
        return None, [Diagnostic(rel, p.line, p.col, p.code, p.message, "", p.hint, context=p.context)]
    doc, problems = render_tree(raw, vars=project.vars)
    render_diags = [Diagnostic(rel, *doc.pos(path), p.code, p.message, path, p.hint) for path, p in problems]
    doc.failed_paths = {path for path, _ in problems}  # type: ignore[attr-defined]  # not checked again
    return doc, render_diags + [Diagnostic(rel, d.line, d.col, d.code, d.message, "", d.hint) for d in dups]


def _compile_file(doc: Located, rel: str, project: Project,
                  project_doc: Located | None = None) -> tuple[list[TablePolicy], list[Diagnostic]]:
    failed: set[str] = getattr(doc, "failed_paths", set())
    diags = [d for d in schema_diagnostics(doc, rel, "policy.schema.json")
             if not any(d.json_path == f or d.json_path.startswith(f + ".") or d.json_path.startswith(f + "[")
                        for f in failed)]
    value = doc.value
    if not isinstance(value, dict):
        if not diags:
            diags.append(Diagnostic(rel, 1, 1, "wrong_type", "a policy file must be a mapping with version and tables"))
        return [], diags
    # typed building needs schema-valid input: build every table whose own entry (and the file
    # defaults) passed the schema, so semantic errors of the others are still reported
    if any(not d.json_path.startswith("tables[") for d in diags) or not isinstance(value.get("tables"), list):
        return [], diags
    broken = {d.json_path.split("]")[0] + "]" for d in diags}
    policies = []
    file_defaults = value.get("defaults") or {}
    for i, table in enumerate(value.get("tables") or []):
        base = f"tables[{i}]"
        if base in broken:
            # every problem at once: the semantic checks still run on the table without the keys the
            # schema refused (their own errors are reported already); the table is not built
            cut = _without(table, [d.json_path for d in diags if d.json_path.startswith(base)], base)
            if cut is not None:
                merged = deep_merge(project.defaults, file_defaults, cut)
                layers = [(doc, rel, base), (doc, rel, "defaults")]
                try:
                    _, more = build_table(merged, doc=doc, file=rel, base=base, layers=layers)
                except (KeyError, TypeError, ValueError, AttributeError):
                    more = []  # too broken to check further: its schema errors say why
                known = {(d.json_path, d.code) for d in diags}
                diags += [d for d in more if (d.json_path, d.code) not in known]
            continue
        cat_layers = _catalog_layers(value, table)
        merged = deep_merge(project.defaults, file_defaults, *(d for d, _ in cat_layers), table)
        # a key inherited from defaults is reported where the default is written
        layers = [(doc, rel, f"tables[{i}]"), *((doc, rel, base) for _, base in reversed(cat_layers)),
                  (doc, rel, "defaults")]
        if project_doc is not None:
            layers.append((project_doc, PROJECT_FILE, "defaults"))
        p, d = build_table(merged, doc=doc, file=rel, base=f"tables[{i}]", layers=layers)
        diags += d
        if p is not None:
            policies.append(p)
    return policies, diags


def _catalog_layers(file_doc: Mapping[str, Any], table: Any) -> list[tuple[Mapping[str, Any], str]]:
    """The file's defaults for the catalog and the namespace a table's discover lists, lowest first (Polaris'
    order: catalog < namespace < table), each with its position in the file."""
    if not isinstance(table, Mapping):
        return []
    d, c = table.get("discover"), table.get("catalog")
    if isinstance(d, Mapping) and d.get("catalog"):
        cat, ns = str(d["catalog"]), str(d.get("namespace") or "")
    elif isinstance(c, Mapping) and c.get("name"):
        cat, ns = str(c["name"]), str(c.get("namespace") or "")
    else:
        return []
    entry = (file_doc.get("catalogs") or {}).get(cat) or {}
    out: list[tuple[Mapping[str, Any], str]] = []
    if entry.get("defaults"):
        out.append((entry["defaults"], f"catalogs.{cat}.defaults"))
    if ns and (entry.get("namespaces") or {}).get(ns):
        out.append((entry["namespaces"][ns], f"catalogs.{cat}.namespaces.{ns}"))
    return out


def _without(table: Any, paths: list[str], base: str) -> dict[str, Any] | None:
    """``table`` without the keys at ``paths`` (schema errors); None when the error is the table itself."""
    import copy

    if not isinstance(table, dict):
        return None
    out = copy.deepcopy(table)
    for path in paths:
        keys = [k for k in path[len(base):].split(".") if k]
        if not keys or any("[" in k for k in keys):
            return None
        node: Any = out
        for k in keys[:-1]:
            node = node.get(k) if isinstance(node, dict) else None
        if not isinstance(node, dict):
            return None
        node.pop(keys[-1], None)
    return out


def _cross_checks(policies: list[TablePolicy], target: Target | None) -> list[Diagnostic]:
    diags: list[Diagnostic] = []
    by_name: dict[str, TablePolicy] = {}
    by_path: dict[str, TablePolicy] = {}
    for p in policies:
        if p.name in by_name:
            first = by_name[p.name]
            diags.append(Diagnostic(p.source.file, p.source.line, p.source.col, "duplicate_name",
                                    f"table name '{p.name}' is already used at {first.source}", "",
                                    "table names must be unique across the project"))
        by_name.setdefault(p.name, p)
        if p.path:
            key = p.path.rstrip("/")
            if key in by_path:
                ref = p.location("path")
                diags.append(Diagnostic(ref.file, ref.line, ref.col, "duplicate_path",
                                        f"path '{p.path}' is already managed by '{by_path[key].name}' "
                                        f"({by_path[key].source})", "", "one policy per table"))
            by_path.setdefault(key, p)
        spec = format_spec(p.format)
        if p.is_catalog_table and spec is not None and spec.catalog_tables and target is not None and target.engine != "spark":
            diags.append(Diagnostic(p.source.file, p.source.line, p.source.col, "catalog_needs_spark",
                                    f"'{p.name}' has no path: it is a catalog table and needs the spark engine",
                                    "", "add `path:` or use a spark target", "warning"))
        named = p.discover.catalog if p.discover is not None else p.catalog.catalog if p.catalog is not None else None
        if named is not None and target is not None and named not in target.catalogs:
            ref = p.location("discover" if p.discover is not None else "catalog")
            diags.append(unknown_catalog(ref.file, ref.line, ref.col, named, target))
    return diags


def _project_positions(project: Project) -> Located | None:
    """Positions of compactor.yml's values (for errors in project defaults and in its dbt entry)."""
    if project.file is None or not (project.defaults or project.dbt):
        return None
    try:
        return load_yaml(project.file.read_text(encoding="utf-8"))[0]
    except (OSError, YamlProblem, UnicodeDecodeError):
        return None


def validate_project(options: ProjectOptions) -> ValidationResult:
    """Load everything and collect every diagnostic. Raises only for a missing/broken project file,
    a missing profile/target (ProjectError/UsageError)."""
    project, diags = load_project(Path(options.project_dir), options.vars)
    if any(d.severity == "error" for d in diags):
        return ValidationResult(False, sorted(diags, key=sort_key), project=project)
    target, tdiags = load_target(project, options.profiles_dir, options.target)
    diags += tdiags
    files = policy_files(project)
    if not files and project.dbt is None:
        diags.append(Diagnostic(PROJECT_FILE, 1, 1, "no_policies",
                                f"no policy files (*.yml) under {', '.join(project.policy_paths)}",
                                "", "add policy files or fix policy-paths", "warning"))
    project_doc = _project_positions(project)
    policies: list[TablePolicy] = []
    rels = []
    for f in files:
        rel = f.relative_to(project.root).as_posix()
        rels.append(rel)
        doc, d = _load_policy_file(f, rel, project)
        diags += d
        if doc is not None:
            ps, d2 = _compile_file(doc, rel, project, project_doc)
            policies += ps
            diags += d2
    if project.dbt is not None:
        from compactor.project.dbt import dbt_policies

        ps, d, manifest = dbt_policies(project, target, project_doc)
        policies += ps
        diags += d
        rels.append(manifest)
    diags += _cross_checks(policies, target)
    for sel in list(options.select) + list(options.exclude):
        err = check_selector(sel)
        if err:
            diags.append(Diagnostic("<command line>", 1, 1, "invalid_selector", err, "", "e.g. tag:nightly, path:policies/*.yml"))
    ok = not any(d.severity == "error" for d in diags)
    selected = select_policies(policies, options.select, options.exclude) if ok else tuple(policies)
    return ValidationResult(ok, sorted(diags, key=sort_key), selected, tuple(policies), project, target, rels)


def compile_project(options: ProjectOptions) -> CompiledProject:
    result = validate_project(options)
    if not result.ok:
        n = len(result.errors)
        lines = "\n".join(str(d) for d in result.errors[:20])
        raise PolicyError(f"{n} policy error(s):\n{lines}", result.diagnostics,
                          hint="run `compactor validate` for the full list")
    assert result.project is not None and result.target is not None
    return CompiledProject(result.project, result.target, result.policies, result.all_policies, result.diagnostics)
