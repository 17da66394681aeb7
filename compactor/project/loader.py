"""Load compactor.yml and profiles.yml (dbt-style) into Project and Target."""

from __future__ import annotations

import os
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

from compactor.errors import PolicyError, ProjectError, UsageError
from compactor.models.catalog import CATALOG_TYPES, CatalogSettings
from compactor.policy.diagnostics import Diagnostic
from compactor.policy.render import render_tree
from compactor.policy.schema import schema_diagnostics
from compactor.policy.yamlpos import YamlProblem, load_yaml
from compactor.project.model import DbtSettings, Project, ProjectOptions, SparkSettings, Target

PROJECT_FILE = "compactor.yml"
PROFILES_FILE = "profiles.yml"


def _load(path: Path, label: str, *, vars: Mapping[str, Any]) -> tuple[Any, list[Diagnostic], Any]:
    try:
        text = path.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as e:
        raise ProjectError(f"cannot read {path}: {e}") from None
    diags: list[Diagnostic] = []
    try:
        raw, dups = load_yaml(text)
    except YamlProblem as e:
        raise ProjectError(f"{path}:{e.line}:{e.col}: {e.code} {e.message}" + (f"\n{e.context}" if e.context else ""),
                           hint=e.hint) from None
    doc, problems = render_tree(raw, vars=vars)
    for jpath, p in problems:
        line, col = doc.pos(jpath)
        raise ProjectError(f"{path}:{line}:{col}: {p.code} {p.message}", hint=p.hint)
    for d in dups:
        diags.append(Diagnostic(label, d.line, d.col, d.code, d.message, "", d.hint))
    return doc, diags, doc.value


def load_project(project_dir: Path, cli_vars: Mapping[str, Any]) -> tuple[Project, list[Diagnostic]]:
    project_dir = Path(project_dir)
    path = project_dir / PROJECT_FILE
    if not path.is_file():
        raise ProjectError(f"no {PROJECT_FILE} in {project_dir.resolve()}",
                           hint="run `compactor init` or pass --project-dir")
    doc, diags, value = _load(path, PROJECT_FILE, vars=cli_vars)
    if not isinstance(value, dict):
        raise ProjectError(f"{path}: expected a mapping with at least `name`")
    diags += schema_diagnostics(doc, PROJECT_FILE, "project.schema.json")
    if isinstance(value.get("defaults"), dict):
        # project defaults obey the same schema as a policy file's defaults
        diags += schema_diagnostics(doc, PROJECT_FILE, "policy.schema.json", ref="#/$defs/defaults",
                                    base="defaults", value=value["defaults"])
    if diags and any(d.severity == "error" for d in diags):
        return Project(name=str(value.get("name", "invalid")), root=project_dir, file=path), diags
    vars = {**(value.get("vars") or {}), **cli_vars}
    paths = value.get("policy-paths") or ["policies"]
    return Project(
        name=value["name"], root=project_dir, policy_paths=tuple(paths),
        target_path=value.get("target-path", "target"), defaults=value.get("defaults") or {},
        vars=vars, profile=value.get("profile") or None, file=path, dbt=_dbt_settings(value.get("dbt"), project_dir),
    ), diags


def _dbt_settings(value: Mapping[str, Any] | None, root: Path) -> DbtSettings | None:
    """compactor.yml ``dbt:`` (schema-valid): paths relative to the project folder; the dbt project is the
    folder above the manifest's (``<dbt project>/target/manifest.json``) unless ``project_dir`` says."""
    if not value:
        return None
    manifest = root / str(value["manifest"])
    project_dir = root / str(value["project_dir"]) if value.get("project_dir") else manifest.parent.parent
    return DbtSettings(manifest=manifest, project_dir=project_dir, catalog=value.get("catalog"))


def unknown_catalog(file: str, line: int, col: int, named: str, target: Target, *, what: str = "catalog",
                    json_path: str = "") -> Diagnostic:
    """A catalog named in a policy or in compactor.yml that the target does not declare."""
    known = ", ".join(sorted(target.catalogs)) or "none"
    return Diagnostic(file, line, col, "unknown_catalog", f"{what} '{named}' is not defined in target "
                      f"'{target.name}' (its catalogs: {known})", json_path,
                      "declare it under the target's `catalogs:` in profiles.yml")


def find_profiles(project_dir: Path, profiles_dir: Path | None) -> Path | None:
    if profiles_dir is not None:
        p = Path(profiles_dir) / PROFILES_FILE
        if not p.is_file():
            raise UsageError(f"no {PROFILES_FILE} in --profiles-dir {profiles_dir}")
        return p
    for d in (Path(project_dir), Path(os.path.expanduser("~/.compactor"))):
        if (d / PROFILES_FILE).is_file():
            return d / PROFILES_FILE
    return None


def load_target(project: Project, profiles_dir: Path | None, target_name: str | None) -> tuple[Target, list[Diagnostic]]:
    """The selected target. Without any profiles.yml, an implicit local-engine target named 'dev'."""
    path = find_profiles(project.root, profiles_dir)
    if path is None:
        if target_name not in (None, "dev"):
            raise UsageError(f"target '{target_name}' requested but no {PROFILES_FILE} was found",
                             hint="create profiles.yml in the project dir or ~/.compactor/")
        return Target(name="dev", profile=project.profile or "default", engine="local",
                      watch_window_s=watch_window(None)), []
    doc, diags, value = _load(path, str(path), vars=project.vars)
    diags += [Diagnostic(str(path), d.line, d.col, d.code, d.message, d.json_path, d.hint)
              for d in schema_diagnostics(doc, str(path), "profiles.schema.json")]
    if any(d.severity == "error" for d in diags):
        return Target(), diags
    if not isinstance(value, dict) or not value:
        raise ProjectError(f"{path}: no profiles defined")
    name = _profile_name(project, value, path)
    profile = value[name]
    outputs = profile["outputs"]
    chosen = target_name or profile.get("target") or next(iter(outputs))
    if chosen not in outputs:
        raise UsageError(f"target '{chosen}' is not defined in profile '{name}' ({path})",
                         hint=f"targets there: {', '.join(outputs)}")
    out = outputs[chosen]
    spark = out.get("spark") or {}
    for cname, c in (out.get("catalogs") or {}).items():
        for key in sorted(set(c) - {"type"} - CATALOG_TYPES.get(str(c.get("type")), frozenset())):
            where = f"{name}.outputs.{chosen}.catalogs.{cname}.{key}"
            line, col = doc.pos(where)
            diags.append(Diagnostic(str(path), line, col, "catalog_option",
                                    f"catalog '{cname}': `{key}` is not an option of a {c.get('type')} catalog",
                                    where, f"its options: {', '.join(sorted(CATALOG_TYPES[str(c.get('type'))]))}"))
    diags += _remote_conflicts(doc, str(path), f"{name}.outputs.{chosen}.spark", spark)
    if any(d.severity == "error" for d in diags):
        return Target(), diags
    return Target(
        name=chosen, profile=name, engine=out["engine"],
        spark=SparkSettings(master=spark.get("master"), remote=spark.get("remote"), app_name=spark.get("app_name", "compactor"),
                            conf={k: str(v) for k, v in (spark.get("conf") or {}).items()},
                            delta_jars=spark.get("delta_jars", "auto"),
                            packages=tuple(spark.get("packages") or ())),
        storage_options={k: str(v) for k, v in (out.get("storage_options") or {}).items()},
        catalogs={n: CatalogSettings(n, str(c["type"]), {k: str(v) for k, v in c.items() if k != "type"})
                  for n, c in (out.get("catalogs") or {}).items()},
        threads=out.get("max_concurrent_rewrites", out.get("threads")),
        profile_targets={str(n): str((o or {}).get("engine", "local")) for n, o in outputs.items()},
        watch_window_s=watch_window(out.get("watch_window"), f"{path}: {name}.outputs.{chosen}.watch_window"),
        **_progress_settings(out, f"{path}: {name}.outputs.{chosen}"),
    ), diags


def _profile_name(project: Project, profiles: Mapping[str, Any], path: Path) -> str:
    """The profile compactor.yml names, which must exist (as dbt: a name that matches none is an error, even
    beside a single profile); without ``profile:``, the one named "default", else the only one."""
    known = ", ".join(map(str, profiles))
    if project.profile is not None:
        if project.profile not in profiles:
            raise ProjectError(f"Could not find profile named '{project.profile}' in {path}",
                               hint=f"profiles there: {known}; set `profile:` in {PROJECT_FILE} to one of them")
        return project.profile
    if "default" in profiles or len(profiles) == 1:
        return "default" if "default" in profiles else str(next(iter(profiles)))
    raise ProjectError(f"{PROJECT_FILE} names no profile and {path} defines several ({known})",
                       hint=f"set `profile:` in {PROJECT_FILE} to one of them")


def _remote_conflicts(doc: Any, file: str, where: str, spark: Mapping[str, Any]) -> list[Diagnostic]:
    """``spark.remote`` connects to a running Spark Connect server: ``master`` (start Spark here) and
    ``packages`` (jars for a session started here) cannot apply with it."""
    if not spark.get("remote"):
        return []
    out = []
    for key, why in (("master", "a session either starts Spark (master) or connects to a Spark Connect server (remote)"),
                     ("packages", "the Spark Connect server loads its own jars; a session cannot add any")):
        if spark.get(key):
            line, col = doc.pos(f"{where}.{key}")
            out.append(Diagnostic(file, line, col, "spark_remote_conflict", f"`spark.{key}` cannot be set with "
                                  f"`spark.remote`: {why}", f"{where}.{key}",
                                  f"remove spark.{key}, or spark.remote to start Spark on this machine"))
    return out


def target_storage_options(options: ProjectOptions) -> Mapping[str, str]:
    """The storage options of the selected profile target (for commands that take a bare path: inspect).
    Without a compactor.yml in the project dir: none (delta-rs and the object store read the environment)."""
    if not (Path(options.project_dir) / PROJECT_FILE).is_file():
        return {}
    project, _ = load_project(Path(options.project_dir), options.vars)
    target, diags = load_target(project, options.profiles_dir, options.target)
    if any(d.severity == "error" for d in diags):
        raise PolicyError("profiles.yml is invalid: run `compactor validate`", diags)
    return target.storage_options


def _progress_settings(out: dict[str, Any], where: str) -> dict[str, Any]:
    """commit_every_bins / commit_every_bytes / max_runtime of a profile output, as Target fields."""
    from compactor.units import UnitError, parse_duration, parse_size

    settings: dict[str, Any] = {}
    parsers: dict[str, tuple[str, Callable[[Any], Any]]] = {"commit_every_bins": ("commit_every_bins", int), "commit_every_bytes": ("commit_every_bytes", parse_size),
               "max_runtime": ("max_runtime_s", lambda v: float(parse_duration(v)))}
    for key, (field, parse) in parsers.items():
        if out.get(key) is None:
            continue
        try:
            settings[field] = parse(out[key])
        except UnitError as e:
            raise ProjectError(f"{where}.{key}: {e}") from None
    return settings


def watch_window(profile_value: object, where: str = "") -> float:
    """Seconds of the post-commit watch: COMPACTOR_WATCH_WINDOW, else the profile's ``watch_window``,
    else the default (3 minutes)."""
    from compactor.project.model import DEFAULT_WATCH_WINDOW_S
    from compactor.units import UnitError, parse_duration

    env = os.environ.get("COMPACTOR_WATCH_WINDOW")
    value, source = (env, "COMPACTOR_WATCH_WINDOW") if env not in (None, "") else (profile_value, where)
    if value is None:
        return DEFAULT_WATCH_WINDOW_S
    try:
        return float(parse_duration(int(value) if isinstance(value, str) and value.strip().isdigit() else value))
    except UnitError as e:
        raise ProjectError(f"{source}: {e}") from None
