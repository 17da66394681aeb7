"""dbt projects as a policy source (compactor.yml ``dbt: {manifest}``).

Every model materialized as table or incremental, every snapshot and every seed whose ``meta.compactor``
holds a policy becomes a table named by its dbt unique id (``model.shop.orders``), with the node's dbt tags.
It is located through its relation (``schema.alias``) in the target's catalog, or at
``<location_root>/<alias>`` when the node sets dbt-spark's ``location_root``, or by the policy's own ``path``.
Diagnostics point at the file and line where the policy is written: the model's ``config(meta=...)``, its
properties YAML (``patch_path``) or the ``+meta`` of dbt_project.yml, in dbt's own order of precedence.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

from compactor.models.formats import format_for_provider
from compactor.policy.build import build_table, deep_merge
from compactor.policy.diagnostics import Diagnostic
from compactor.policy.model import DbtRef, TablePolicy
from compactor.policy.schema import schema_diagnostics
from compactor.policy.yamlpos import Located, YamlProblem, load_yaml
from compactor.project.dbt_manifest import RESOURCE_KEYS, DbtNode, ManifestError, read_manifest
from compactor.project.loader import PROJECT_FILE, unknown_catalog
from compactor.project.model import DbtSettings, Project, Target

#: keys a dbt node's policy does not set: the node is the table
NODE_KEYS = ("name", "discover")
_CONFIG_CALL = re.compile(r"\bconfig\s*\(")
_COMPACTOR_KEY = re.compile(r"""["']?\bcompactor\b["']?\s*[:=]""")


@dataclass(frozen=True)
class Written:
    """Where a node's policy is written: a document with positions, its name in diagnostics, and the JSON
    path of the ``compactor`` mapping in it."""

    doc: Located
    file: str
    base: str


def dbt_policies(project: Project, target: Target,
                 project_doc: Located | None) -> tuple[list[TablePolicy], list[Diagnostic], str]:
    """The policies of the project's dbt nodes, every diagnostic, and the manifest's name in diagnostics."""
    settings = project.dbt
    assert settings is not None
    sources = _Sources(settings, project.root)
    shown = sources.shown(settings.manifest)
    try:
        nodes = read_manifest(settings.manifest)
    except ManifestError as e:
        line, col = project_doc.pos("dbt.manifest") if project_doc is not None else (1, 1)
        return [], [Diagnostic(PROJECT_FILE, line, col, "dbt_manifest", str(e), "dbt.manifest",
                               "run `dbt parse` in the dbt project: it writes target/manifest.json "
                               "without reaching the warehouse")], shown
    catalog, diags = _catalog(settings, target, project_doc)
    policies: list[TablePolicy] = []
    kind = target.catalogs[catalog].type if catalog is not None else ""
    for node in nodes:
        p, d = _node_policy(node, sources.where(node), catalog, kind, project, project_doc, shown)
        diags += d
        if p is not None:
            policies.append(p)
    return policies, diags, shown


def _catalog(settings: DbtSettings, target: Target,
             project_doc: Located | None) -> tuple[str | None, list[Diagnostic]]:
    """The target's catalog that locates the nodes' relations: ``dbt.catalog``, else the only one."""
    if settings.catalog is None:
        return (next(iter(target.catalogs)) if len(target.catalogs) == 1 else None), []
    if settings.catalog in target.catalogs:
        return settings.catalog, []
    line, col = project_doc.pos("dbt.catalog") if project_doc is not None else (1, 1)
    return None, [unknown_catalog(PROJECT_FILE, line, col, settings.catalog, target, what="dbt.catalog",
                                  json_path="dbt.catalog")]


def _positions(value: dict[str, Any], base: str) -> Located:
    """A document at 1:1 for every key of ``value`` under ``base`` (values taken from the manifest)."""
    out: dict[str, tuple[int, int]] = {base: (1, 1)}

    def walk(v: Any, path: str) -> None:
        for k, sub in (v.items() if isinstance(v, dict) else ()):
            out[f"{path}.{k}"] = (1, 1)
            walk(sub, f"{path}.{k}")

    walk(value, base)
    return Located(value, out)


def _node_policy(node: DbtNode, w: Written, catalog: str | None, catalog_type: str, project: Project,
                 project_doc: Located | None, manifest: str) -> tuple[TablePolicy | None, list[Diagnostic]]:
    def problem(code: str, message: str, hint: str, severity: str = "error", key: str = "") -> Diagnostic:
        path = f"{w.base}.{key}" if key else w.base
        return Diagnostic(w.file, *w.doc.pos(path), code, message, path, hint, severity)

    if not node.is_table:
        return None, [problem("dbt_not_a_table", f"{node.unique_id} is materialized as {node.materialized}: it "
                              "has no files to compact; its compactor policy is ignored",
                              "materialize it as table or incremental, or remove meta.compactor", "warning")]
    policy = node.policy
    if not isinstance(policy, dict):
        return None, [problem("wrong_type", f"meta.compactor of {node.unique_id} must be a mapping: a table "
                              "policy (compaction, retention, tags, ...)", "e.g. compactor: {compaction: "
                              "{target_file_size: 256MiB}}")]
    diags = [problem("dbt_node_key", f"`{k}` is not set on a dbt node: the table is {node.unique_id}",
                     f"remove `{k}`", key=k) for k in NODE_KEYS if k in policy]
    table = {**policy, "name": node.unique_id}
    diags += schema_diagnostics(w.doc, w.file, "policy.schema.json", ref="#/$defs/table", base=w.base, value=table)
    if diags:
        return None, diags
    placed: dict[str, Any] = {}
    if "path" not in policy and "catalog" not in policy:
        if node.file_format is not None and "format" not in policy:
            spec = format_for_provider(node.file_format)
            if spec is None:
                return None, [problem("dbt_unsupported_format", f"{node.unique_id} is written as "
                                      f"{node.file_format} (file_format): compactor plans Delta tables; its "
                                      "compactor policy is ignored", "use file_format: delta", "warning")]
            placed["format"] = spec.name
        if node.location_root is not None:
            placed["path"] = f"{node.location_root.rstrip('/')}/{node.alias}"
        elif catalog is not None:
            # a three-level catalog (Unity: dbt-databricks' database is the UC catalog) names it first
            three_level = catalog_type == "unity" and node.database
            namespace = f"{node.database}.{node.schema}" if three_level else node.schema
            placed["catalog"] = {"name": catalog, "namespace": namespace, "table": node.alias}
        else:
            return None, [problem("dbt_no_location", f"{node.unique_id} ({node.relation}) has no location: "
                                  "no catalog locates it and it sets no location_root",
                                  "declare one catalog in the target (or name it in compactor.yml "
                                  "`dbt: {catalog: ...}`), or set `path:` in meta.compactor")]
    placed["name"] = node.unique_id
    tags = list(dict.fromkeys([*node.tags, *(policy.get("tags") or ())]))
    if tags:
        placed["tags"] = tags
    merged = deep_merge(project.defaults, policy, placed)
    # what the manifest decides (name, location, dbt tags) is reported as coming from it
    layers = [(w.doc, w.file, w.base), (_positions(placed, "manifest"), manifest, "manifest")]
    if project_doc is not None:
        layers.append((project_doc, PROJECT_FILE, "defaults"))
    p, d = build_table(merged, doc=w.doc, file=w.file, base=w.base, layers=layers)
    if p is None:
        return None, d
    return replace(p, dbt=DbtRef(node.unique_id, node.name, node.resource_type, node.relation)), d


def _closing_paren(text: str, start: int) -> int:
    """The end of the call whose arguments start at ``start`` (quotes skipped); the text's end if unclosed."""
    depth, quote, i = 1, "", start
    while i < len(text):
        ch = text[i]
        if quote:
            quote = "" if ch == quote else quote
        elif ch in "'\"":
            quote = ch
        elif ch == "(":
            depth += 1
        elif ch == ")":
            depth -= 1
            if depth == 0:
                return i
        i += 1
    return len(text)


class _Sources:
    """The dbt project's files, loaded once each, and where a node's policy is written in them."""

    def __init__(self, settings: DbtSettings, root: Path) -> None:
        self.dir, self.root = settings.project_dir, root
        self._docs: dict[Path, Located | None] = {}
        project = self._yaml(self.dir / "dbt_project.yml")
        self.name = project.value.get("name") if project is not None and isinstance(project.value, dict) else None

    def _home(self, node: DbtNode) -> Path:
        """The folder a node's paths are relative to: the project, or the installed package it comes from."""
        return self.dir if node.package in ("", self.name) else self.dir / "dbt_packages" / node.package

    def shown(self, path: Path) -> str:
        """``path`` as diagnostics name it: relative to the compactor project when inside it."""
        path = path.resolve()
        try:
            return path.relative_to(self.root.resolve()).as_posix()
        except ValueError:
            return str(path)

    def where(self, node: DbtNode) -> Written:
        """dbt's precedence: the model's own config() call, then its properties YAML, then dbt_project.yml."""
        return (self._in_config_call(node) or self._in_properties(node) or self._in_dbt_project(node)
                or Written(Located(None), self.shown(self._home(node) / node.original_file_path), ""))

    def _yaml(self, path: Path) -> Located | None:
        if path not in self._docs:
            try:
                self._docs[path] = load_yaml(path.read_text(encoding="utf-8"))[0]
            except (OSError, UnicodeDecodeError, YamlProblem):
                self._docs[path] = None
        return self._docs[path]

    def _in_config_call(self, node: DbtNode) -> Written | None:
        try:
            text = (self._home(node) / node.original_file_path).read_text(encoding="utf-8")
        except (OSError, UnicodeDecodeError):
            return None
        call = _CONFIG_CALL.search(text)
        key = _COMPACTOR_KEY.search(text, call.end(), _closing_paren(text, call.end())) if call is not None else None
        if key is None:
            return None
        line = text.count("\n", 0, key.start()) + 1
        col = key.start() - (text.rfind("\n", 0, key.start()) + 1) + 1
        return Written(Located(None, {"config": (line, col)}),
                       self.shown(self._home(node) / node.original_file_path), "config")

    def _in_properties(self, node: DbtNode) -> Written | None:
        doc = self._yaml(self._home(node) / node.patch_path) if node.patch_path else None
        if doc is None or not isinstance(doc.value, dict):
            return None
        key = RESOURCE_KEYS[node.resource_type]
        for i, entry in enumerate(doc.value.get(key) or ()):
            if isinstance(entry, dict) and entry.get("name") == node.name:
                for base in (f"{key}[{i}].config.meta.compactor", f"{key}[{i}].meta.compactor"):
                    if base in doc.positions:
                        assert node.patch_path is not None
                        return Written(doc, self.shown(self._home(node) / node.patch_path), base)
        return None

    def _in_dbt_project(self, node: DbtNode) -> Written | None:
        doc = self._yaml(self.dir / "dbt_project.yml")
        if doc is None:
            return None
        key = RESOURCE_KEYS[node.resource_type]
        for depth in range(len(node.fqn), -1, -1):  # the most specific folder first
            scope = ".".join((key, *node.fqn[:depth]))
            for meta in ("+meta", "meta"):
                base = f"{scope}.{meta}.compactor"
                if base in doc.positions:
                    return Written(doc, self.shown(self.dir / "dbt_project.yml"), base)
        return None
