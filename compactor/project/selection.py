"""dbt-style selection: --select / --exclude with names (globs), tag:X, path:GLOB, format:F, dbt:NODE."""

from __future__ import annotations

import difflib
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


def suggest_selector(policies: Sequence[TablePolicy], sel: str) -> str | None:
    """The selector closest to ``sel`` (a mistyped name, tag or dbt node) that matches a table, or None."""
    method, sep, value = sel.partition(":")
    if not sep:
        method, value = "name", sel
    known: dict[str, set[str]] = {"name": set(), "tag": set(), "dbt": set(), "format": set(), "path": set()}
    for p in policies:
        known["name"].add(p.name)
        known["tag"].update(p.tags)
        known["format"].add(p.format)
        known["path"].add(p.source.file)
        if p.dbt is not None:
            known["dbt"].update((p.dbt.name, p.dbt.unique_id))
    close = difflib.get_close_matches(value, sorted(known.get(method, ())), n=1, cutoff=0.6)
    if not close:
        return None
    return close[0] if not sep else f"{method}:{close[0]}"
