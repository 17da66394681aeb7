"""Discover over a catalog: a policy's ``discover: {catalog, namespace, include, exclude}`` becomes one
policy per matching table, located through the catalog's API (no JVM for Glue). A table in a format
compactor does not plan (a format without a registry line, a plain parquet table) stays in the plan, skipped as
unsupported with the catalog's reason."""

from __future__ import annotations

import fnmatch
from dataclasses import replace

from compactor.catalogs import Catalog, open_catalog
from compactor.errors import CatalogError, UnsupportedFormatError
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
    tables = _open(p.name, d.catalog, target, opened).list_tables(d.namespace or "")
    out: list[TablePolicy] = []
    for t in tables:
        if not _selected(t.name, d.include, d.exclude):
            continue
        name = f"{p.name}/{t.name}"
        if t.format is None or t.location is None:
            errors[name] = UnsupportedFormatError(f"{t.qualified_name}: {t.reason}")
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
    t = _open(p.name, ref.catalog, target, opened).get_table(ref.namespace, ref.table)
    if t.format is None or t.location is None:
        errors[p.name] = UnsupportedFormatError(f"{t.qualified_name}: {t.reason}")
        return replace(p, path=t.location or t.qualified_name)
    return replace(p, path=t.location, format=t.format)


def _open(policy: str, name: str, target: Target, opened: dict[str, Catalog]) -> Catalog:
    settings = target.catalogs.get(name)
    if settings is None:
        raise CatalogError(f"{policy}: catalog '{name}' is not defined in the target",
                           hint="declare it under the target's `catalogs:` in profiles.yml")
    if name not in opened:
        register_secrets({k: v for k, v in settings.options.items() if k in SECRET_KEYS})
        opened[name] = open_catalog(settings, target.spark, any_format(target.spark))
    return opened[name]


def _selected(name: str, include: tuple[str, ...], exclude: tuple[str, ...]) -> bool:
    return any(fnmatch.fnmatchcase(name, g) for g in include) and not any(fnmatch.fnmatchcase(name, g)
                                                                          for g in exclude)

