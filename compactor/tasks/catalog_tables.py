"""Discover over a catalog: a policy's ``discover: {catalog, namespace, include, exclude}`` becomes one
policy per matching table, located through the catalog's API (no JVM for Glue). A table in a format
compactor does not plan (a format without a registry line, a plain parquet table) stays in the plan, skipped as
unsupported with the catalog's reason.

A table is planned in the format its catalog registers it in (whatever policy names it) when the policy
leaves its format to the default and its settings apply to that format; a policy that declares another
format, or whose settings do not apply, is refused naming the format to declare (a table it names: an
error; a table its discover found: skipped as unsupported). A policy of a format whose tables are named by
a catalog only reads the catalog through that format's own client (catalogs/__init__.py: ``providers``)."""

from __future__ import annotations

import fnmatch
from dataclasses import replace

from compactor.catalogs import Catalog, open_catalog
from compactor.errors import CatalogError, UnsupportedFormatError
from compactor.models.catalog import CatalogTable
from compactor.models.formats import format_spec
from compactor.models.table import TableIdentifier
from compactor.policy.model import TablePolicy
from compactor.project.model import Target
from compactor.runtime.secrets import register_secrets
from compactor.tasks.spark_needs import any_format

#: catalog option keys whose values are credentials (never in an error, a log line or an artifact)
SECRET_KEYS = ("aws_access_key_id", "aws_secret_access_key", "aws_session_token", "token", "client_secret",
               "credential")


def catalog_policies(p: TablePolicy, target: Target, opened: dict[str, Catalog],
                     errors: dict[str, Exception]) -> list[TablePolicy]:
    """The tables ``p``'s catalog discover selects, each a policy named ``<policy>/<table>`` with the
    table's location; an unsupported table's policy maps to its reason in ``errors``."""
    d = p.discover
    assert d is not None and d.catalog is not None
    tables = _open(p, d.catalog, target, opened).list_tables(d.namespace or "")
    out: list[TablePolicy] = []
    for t in tables:
        if not _selected(t.name, d.include, d.exclude):
            continue
        name = f"{p.name}/{t.name}"
        refused = _refused(p, t)
        if t.format is None or t.location is None or refused is not None:
            errors[name] = UnsupportedFormatError(f"{t.qualified_name}: {refused or t.reason}")
            out.append(replace(p, name=name, path=t.location or t.qualified_name, discover=None))
            continue
        out.append(replace(p, name=name, path=t.location, format=t.format, discover=None,
                           catalog=TableIdentifier(d.catalog, t.namespace, t.name)))
    return out


def catalog_policy(p: TablePolicy, target: Target, opened: dict[str, Catalog],
                   errors: dict[str, Exception]) -> TablePolicy:
    """``p`` with the location and format of the table its ``catalog:`` names; a table compactor does not
    plan maps to its reason in ``errors``."""
    ref = p.catalog
    assert ref is not None
    t = _open(p, ref.catalog, target, opened).get_table(ref.namespace, ref.table)
    if t.format is None or t.location is None:
        errors[p.name] = UnsupportedFormatError(f"{t.qualified_name}: {t.reason}")
        return replace(p, path=t.location or t.qualified_name)
    refused = _refused(p, t)
    if refused is not None:
        raise CatalogError(f"{p.name}: {t.qualified_name}: {refused}", hint=f"declare `format: {t.format}` in its "
                           f"policy ({p.source}), with settings that apply to {t.format} tables")
    return replace(p, path=t.location, format=t.format)


def _refused(p: TablePolicy, t: CatalogTable) -> str | None:
    """Why ``p`` cannot plan ``t`` in the format its catalog registers it in (None: it can): the policy
    declares another format, or settings that do not apply to that one."""
    spec = format_spec(t.format) if t.format is not None else None
    if spec is None or spec.name == p.format:
        return None
    said = f"its catalog registers it in format {spec.name}"
    if "format" in p.declared:
        return f"{said}, and the policy declares `format: {p.format}`: declare `format: {spec.name}` for it"
    if p.compaction.strategy not in spec.strategies:
        return (f"{said}, and the policy's compaction.strategy {p.compaction.strategy} does not apply to "
                f"{spec.name} tables ({', '.join(sorted(spec.strategies))}): declare `format: {spec.name}` in a "
                "policy of its own")
    if p.retention is not None and not spec.retention:
        return (f"{said}, and the policy's `retention:` does not apply to {spec.name} tables: declare "
                f"`format: {spec.name}` in a policy of its own")
    return None


def _open(p: TablePolicy, name: str, target: Target, opened: dict[str, Catalog]) -> Catalog:
    """The catalog ``name`` of the target, opened once per kind of reader: a policy of a format named by a
    catalog only reads it through that format's client (``providers``), any other through the catalog's."""
    settings = target.catalogs.get(name)
    if settings is None:
        raise CatalogError(f"{p.name}: catalog '{name}' is not defined in the target",
                           hint="declare it under the target's `catalogs:` in profiles.yml")
    spec = format_spec(p.format)
    providers = spec.catalog_providers if spec is not None and spec.catalog_only else frozenset()
    key = "/".join([name, *sorted(providers)])
    if key not in opened:
        register_secrets({k: v for k, v in settings.options.items() if k in SECRET_KEYS})
        opened[key] = open_catalog(settings, target.spark, any_format(target.spark), providers=providers,
                                   storage_options=target.storage_options)
    return opened[key]


def _selected(name: str, include: tuple[str, ...], exclude: tuple[str, ...]) -> bool:
    return any(fnmatch.fnmatchcase(name, g) for g in include) and not any(fnmatch.fnmatchcase(name, g)
                                                                          for g in exclude)

