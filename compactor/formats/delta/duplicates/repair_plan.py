"""The repair of open anomalies, as data (PURE: no I/O here).

A repair reverts the commits that put the extra rows in the table: the anomaly's own commit and every
rewrite that consumed its files since (its *chain*). In one ``dataChange=false`` commit it removes the
chain's live files (``remove``) and brings back what the chain consumed legitimately (``restore``: files
that were live when a chain commit removed them), so that each path ends as it was before the chain
first touched it. What that takes out of the table is exactly the anomalies' ``excess`` files' rows:

    rows(remove) == rows(restore) + sum over anomalies of rows(excess)            (1)

apply proves (1) on the files' contents before it commits (formats/delta/duplicates/repair.py), checks against
delta-rs' own snapshot of the version before each anomaly that its excess files were indeed not live
then (2), and, for each excess file in ``checked``, that its rows still have their other copy in
``keep`` (3): the live files the commit that first consumed it rewrote them into, through rewrites only.
Where a data change lies on that path (an UPDATE rewrote the other copy before the stale rewrite
committed), the other copy legitimately differs and (1) and (2) carry the proof alone.

This module only says which files, and why a repair must not be done (``problems``).
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass

from compactor.formats.delta.duplicates.lineage import REPAIR_OF, Anomaly, Lineage


@dataclass(frozen=True)
class RepairProposal:
    """The repair of open anomalies (module docstring): the commits it reverts, the files it removes and restores."""

    #: the anomalies repaired (their versions)
    anomalies: tuple[int, ...]
    #: every commit reverted
    chain: tuple[int, ...]
    remove: tuple[str, ...]
    restore: tuple[str, ...]
    #: (anomaly version, path): the files whose rows are the extra copy, with multiplicity
    excess: tuple[tuple[int, str], ...]
    #: live files the repair does not remove that hold the other copy of the ``checked`` excess rows
    keep: tuple[str, ...]
    #: excess files whose rows must each be found in ``keep`` + ``restore`` (module docstring, (3))
    checked: tuple[str, ...]
    #: the oldest version the repair depends on (apply reads the log from here)
    first_version: int
    #: why it must not be committed (empty when it may)
    problems: tuple[str, ...] = ()

    @property
    def repairable(self) -> bool:
        return not self.problems


def _is_repair(version: int | None, lineage: Lineage) -> bool:
    c = lineage.commits.get(version) if version is not None else None
    return c is not None and not c.data_change and bool(c.metadata(REPAIR_OF))


def _chain_of(start: int, lineage: Lineage, problems: list[str]) -> set[int]:
    """``start`` and every commit that consumed, directly or through other rewrites, a file it added."""
    chain: set[int] = set()
    stack = [start]
    while stack:
        v = stack.pop()
        if v in chain:
            continue
        chain.add(v)
        for p in lineage.commits[v].adds:
            if p in lineage.live:
                continue
            d = lineage.consumed_by.get(p)
            if d is None or d == v or d in chain:
                continue
            if lineage.commits[d].data_change:
                if lineage.moves_content(d):
                    problems.append(f"version {d} changed data in {p}, which holds rows of version {v}: reverting "
                                    "the rewrites would undo that change")
            elif _is_repair(d, lineage):
                problems.append(f"version {d} (a compactor repair) removed {p}, a file of version {v}, without "
                                "naming it: the repairs interleave in a way compactor will not revert")
            else:
                stack.append(d)
    return chain


def _first_events(chain: set[int], lineage: Lineage) -> dict[str, str]:
    """Per path the chain touched, what the first chain commit to touch it did: "consumed" (it was live
    and the commit removed it: after the revert it is live again) or "added" (the chain put it there:
    after the revert it is gone). Reverting every chain commit leaves each path as it was before its
    first event."""
    first: dict[str, str] = {}
    for v in sorted(chain):
        for p in lineage.live_removes.get(v, ()):
            first.setdefault(p, "consumed")
        for p in lineage.commits[v].adds:
            first.setdefault(p, "added")
    return first


def _descendants(start: int, lineage: Lineage, exclude: set[int]) -> tuple[set[str], bool]:
    """The live files the adds of ``start`` became through rewrites outside ``exclude`` (the chain), and
    whether every path there went through rewrites only (False: a data change rewrote some of them)."""
    out: set[str] = set()
    pure = True
    seen: set[int] = set()
    stack = [start]
    while stack:
        v = stack.pop()
        if v in seen or v not in lineage.commits:
            continue
        seen.add(v)
        for p in lineage.commits[v].adds:
            if p in lineage.live:
                out.add(p)
                continue
            d = lineage.consumed_by.get(p)
            if d is None or d in exclude:
                continue
            if lineage.is_rewrite(d) and not _is_repair(d, lineage):
                stack.append(d)
            else:
                pure = False
    return out, pure


def _excess_files(a: Anomaly, lineage: Lineage) -> set[str]:
    """The files whose first consumer holds the other copy of the anomaly's extra rows."""
    if a.kind == "readd":
        return set(a.excess)
    return set(lineage.commits[a.version].removes) - set(lineage.live_removes.get(a.version, ()))


def propose(lineage: Lineage) -> RepairProposal | None:
    """The repair of every open anomaly of ``lineage`` (None when there is none)."""
    by_version = {a.version: a for a in lineage.anomalies}
    ids = {a.version for a in lineage.open}
    if not ids:
        return None
    problems: list[str] = []
    while True:
        chain: set[int] = set()
        for a in sorted(ids):
            chain |= _chain_of(a, lineage, problems)
        first = _first_events(chain, lineage)
        remove = {p for p, e in first.items() if e == "added" and p in lineage.live}
        # a file the repair removes may carry other anomalies' rows too: those are repaired with it
        more = {a for p in remove for a in lineage.carries.get(p, ()) if a in by_version} - ids
        if not more:
            break
        for a in sorted(more):
            if by_version[a].status != "open":
                problems.append(f"a file holding the duplicated rows of version {sorted(ids)[0]} also holds those of "
                                f"version {a}, which cannot be repaired ({by_version[a].reason or by_version[a].status})")
        ids |= more
    restore = {p for p, e in first.items() if e == "consumed" and p not in lineage.live}
    for p in sorted(restore):
        last = lineage.removed.get(p)
        if last is not None and last not in chain and lineage.moves_content(last):
            problems.append(f"{p}, which a reverted rewrite consumed, was rewritten again by version {last}: "
                            "restoring it would duplicate its rows")
    for p, e in sorted(first.items()):
        if e == "consumed" and p in lineage.live and lineage.produced_by.get(p) not in chain:
            problems.append(f"{p}, which a reverted rewrite consumed, was re-added since by version "
                            f"{lineage.produced_by.get(p)}: restoring it would duplicate its rows")
    excess = [(a, p) for a in sorted(ids) for p in sorted(by_version[a].excess)]
    # the other copy: what the first consumer of each excess file rewrote it into (rewrites only), and
    # files the chain consumed that are live again (a stale repair re-added them)
    stay = {p for p, e in first.items() if e == "consumed" and p in lineage.live}
    keep: set[str] = set(stay)
    checked: set[str] = set()
    sources: set[int] = set()
    for a in sorted(ids):
        for p in _excess_files(by_version[a], lineage):
            d = lineage.consumed_by.get(p)
            if d is None or d == a or _is_repair(d, lineage) or lineage.produced_by.get(p) in chain:
                continue  # rows a repair proved extra, or rows of the chain itself (restored or excess)
            sources.add(d)
            files, pure = _descendants(d, lineage, chain)
            keep |= files
            if pure and lineage.commits.get(d) is not None and not lineage.commits[d].data_change:
                checked.add(p)
    keep -= remove
    checked &= {p for _, p in excess}
    earliest = [*chain, *sources, *(v for a in ids for v in by_version[a].earlier_versions)]
    return RepairProposal(tuple(sorted(ids)), tuple(sorted(chain)), tuple(sorted(remove)), tuple(sorted(restore)),
                          tuple(excess), tuple(sorted(keep)), tuple(sorted(checked)), min(earliest),
                          tuple(dict.fromkeys(problems)))


def excess_rows_checked(proposal: RepairProposal) -> Iterable[tuple[int, str]]:
    """The (anomaly, path) pairs whose rows must be found in keep + restore."""
    return [(a, p) for a, p in proposal.excess if p in proposal.checked]
