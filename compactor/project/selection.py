"""dbt-style selection: --select / --exclude with names (globs), tag:X, path:GLOB, format:F, dbt:NODE."""

from __future__ import annotations

import fnmatch
from collections.abc import Iterable, Sequence

from compactor.errors import UsageError
from compactor.policy.model import TablePolicy

METHODS = ("tag", "path", "format", "name", "dbt")


def check_selector(sel: str) -> str | None:
    """An error message for a malformed selector, or None."""
    if not sel:
        return "empty selector"
    if ":" in sel:
        method, _, value = sel.partition(":")
        if method not in METHODS:
            return f"unknown selector method '{method}:' (use one of {', '.join(m + ':' for m in METHODS)})"
        if not value:
            return f"selector '{sel}' has no value"
    return None


def _matches(p: TablePolicy, sel: str) -> bool:
    method, sep, value = sel.partition(":")
    if not sep:
        method, value = "name", sel
    if method == "name":
        return fnmatch.fnmatchcase(p.name, value)
    if method == "tag":
        return any(fnmatch.fnmatchcase(t, value) for t in p.tags)
    if method == "path":
        return fnmatch.fnmatchcase(p.source.file, value) or fnmatch.fnmatchcase(p.source.file, value.rstrip("/") + "/*")
    if method == "format":
        return p.format == value
    if method == "dbt":  # a dbt node by name or unique id (dbt:orders, dbt:model.shop.*)
        return p.dbt is not None and (fnmatch.fnmatchcase(p.dbt.name, value) or fnmatch.fnmatchcase(p.dbt.unique_id, value))
    return False


def select_policies(policies: Sequence[TablePolicy], select: Iterable[str] = (),
                    exclude: Iterable[str] = ()) -> tuple[TablePolicy, ...]:
    select, exclude = list(select), list(exclude)
    for s in select + exclude:
        err = check_selector(s)
        if err:
            raise UsageError(f"--select/--exclude: {err}")
    chosen = [p for p in policies if not select or any(_matches(p, s) for s in select)]
    return tuple(p for p in chosen if not any(_matches(p, s) for s in exclude))
